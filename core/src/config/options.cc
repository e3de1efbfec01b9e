#include "duet/options.h"

#include <charconv>
#include <cmath>

#include "duet/app/suggest.h"
#include "duet/error.h"

namespace duet {
namespace {

// Errors name "path.key" so the user can find the line in the YAML file.
std::string key_path(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

// Shortest text that reads back as the same double ("0.95", "1e-05"); 32
// characters hold any double.
std::string format_double(double v) {
  char buffer[32];
  char* end = std::to_chars(buffer, buffer + sizeof buffer, v).ptr;
  return std::string(buffer, end);
}

// Parses the whole of `text` as a T; nullopt on any leftover character.
template <typename T>
std::optional<T> parse_number(const std::string& text) {
  T value{};
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

}  // namespace

std::optional<std::string> Options::lookup(const std::string& key) const {
  used_.insert(key);
  auto it = values_.find(key);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

int64_t Options::get_int(const std::string& key, int64_t fallback, int64_t min, int64_t max) const {
  std::optional<std::string> text = lookup(key);
  if (!text) return fallback;
  const std::string range = std::to_string(min) + ".." + std::to_string(max);
  std::optional<int64_t> value = parse_number<int64_t>(*text);
  if (!value)
    throw Error(ErrorKind::kConfig, key_path(path_, key) + ": expected an integer in " + range +
                                        ", found '" + *text + "'");
  if (*value < min || *value > max)
    throw Error(ErrorKind::kConfig, key_path(path_, key) + ": " + *text +
                                        " is out of range; expected an integer in " + range);
  return *value;
}

double Options::get_double(const std::string& key, double fallback, double min, double max) const {
  std::optional<std::string> text = lookup(key);
  if (!text) return fallback;
  const std::string range = format_double(min) + ".." + format_double(max);
  std::optional<double> value = parse_number<double>(*text);
  // from_chars accepts "nan" and "inf"; a NaN would pass any range check.
  if (!value || !std::isfinite(*value))
    throw Error(ErrorKind::kConfig, key_path(path_, key) + ": expected a number in " + range +
                                        ", found '" + *text + "'");
  if (*value < min || *value > max)
    throw Error(ErrorKind::kConfig, key_path(path_, key) + ": " + *text +
                                        " is out of range; expected a number in " + range);
  return *value;
}

bool Options::get_bool(const std::string& key, bool fallback) const {
  std::optional<std::string> text = lookup(key);
  if (!text) return fallback;
  if (*text == "true") return true;
  if (*text == "false") return false;
  throw Error(ErrorKind::kConfig,
              key_path(path_, key) + ": expected true or false, found '" + *text + "'");
}

std::string Options::get_string(const std::string& key, const std::string& fallback) const {
  return lookup(key).value_or(fallback);
}

std::string Options::get_choice(const std::string& key, const std::string& fallback,
                                const std::vector<std::string>& choices) const {
  std::optional<std::string> text = lookup(key);
  if (!text) return fallback;
  for (const auto& c : choices)
    if (*text == c) return c;
  throw Error(ErrorKind::kConfig, key_path(path_, key) + ": expected one of " +
                                      quoted_list(choices) + ", found '" + *text + "'" +
                                      did_you_mean(*text, choices));
}

void Options::require(const std::string& key, const std::string& what) const {
  used_.insert(key);
  if (has(key)) return;
  std::vector<std::string> given;
  for (const auto& entry : values_) {
    if (used_.count(entry.first) == 0) given.push_back(entry.first);
  }
  std::string message = key_path(path_, key) + " is required (" + what + ")";
  std::string misspelt;
  for (const std::string& g : given) {
    if (!did_you_mean(g, {key}).empty()) misspelt = g;
  }
  if (!misspelt.empty()) {
    message += "; '" + misspelt + "' was given: did you mean '" + key + "'?";
  } else {
    message += "; set it under " + (path_.empty() ? std::string("the options") : path_);
  }
  throw Error(ErrorKind::kConfig, message);
}

void Options::finish() const {
  const std::vector<std::string> known(used_.begin(), used_.end());
  std::string message;
  for (const auto& entry : values_) {
    const std::string& key = entry.first;
    if (used_.count(key) != 0) continue;
    if (!message.empty()) message += '\n';
    message += key_path(path_, key) + ": unknown option '" + key + "'";
    if (known.empty())
      message += "; this component takes no options";
    else if (std::string suggestion = did_you_mean(key, known); !suggestion.empty())
      message += suggestion;
    else
      message += "; known options: " + quoted_list(known);
  }
  if (!message.empty()) throw Error(ErrorKind::kConfig, message);
}

}  // namespace duet
