#include "link_options.h"

#include <charconv>
#include <cmath>
#include <limits>

#include "duet/error.h"

namespace duet::samplers {
namespace {

// Shortest text that reads back as the same double ("0.95", "1e-05").
std::string format_real(double v) {
  char buffer[32];
  char* end = std::to_chars(buffer, buffer + sizeof buffer, v).ptr;
  return std::string(buffer, end);
}

std::string with_note(std::string text, const std::string& note) {
  return note.empty() ? text : text + " (" + note + ")";
}

std::string describe(const RealRange& r) {
  if (std::isinf(r.max))
    return with_note("a number " + std::string(r.min_open ? "> " : ">= ") + format_real(r.min),
                     r.note);
  return with_note("a number in " + std::string(r.min_open ? "(" : "[") + format_real(r.min) +
                       ", " + format_real(r.max) + (r.max_open ? ")" : "]"),
                   r.note);
}

std::string describe(const IntRange& r) {
  if (r.max == std::numeric_limits<int64_t>::max())
    return with_note("an integer >= " + std::to_string(r.min), r.note);
  return with_note("an integer in [" + std::to_string(r.min) + ", " + std::to_string(r.max) + "]",
                   r.note);
}

bool in_range(double v, const RealRange& r) {
  const bool above_min = r.min_open ? v > r.min : v >= r.min;
  const bool below_max = r.max_open ? v < r.max : v <= r.max;
  return above_min && below_max;
}

// Parses the whole of `text` as a T; nullopt on any leftover character.
template <typename T>
std::optional<T> parse(const std::string& text) {
  T value{};
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

struct Given {
  std::string key;
  std::string text;
};

std::optional<Given> given_text(const Options& options, const std::string& key) {
  if (!options.has(key)) {
    options.get_string(key, "");  // known to finish(), for its suggestions
    return std::nullopt;
  }
  return Given{key, options.get_string(key, "")};
}

std::optional<Given> primary_text(const Options& options, const std::string& name) {
  std::optional<Given> named = given_text(options, name);
  std::optional<Given> shorthand = given_text(options, kShorthandKey);
  if (named && shorthand)
    throw Error(ErrorKind::kConfig, options.path() + ": both '" + name + "' (" + named->text +
                                        ") and its shorthand '" + kShorthandKey + "' (" +
                                        shorthand->text + ") are given; keep one");
  return named ? named : shorthand;
}

double to_real(const Options& options, const Given& given, const RealRange& range) {
  std::optional<double> value = parse<double>(given.text);
  // from_chars accepts "nan" and "inf"; a NaN would pass any range check.
  if (!value || !std::isfinite(*value))
    throw Error(ErrorKind::kConfig, key_path(options, given.key) + ": expected " + describe(range) +
                                        ", found '" + given.text + "'");
  if (!in_range(*value, range))
    throw Error(ErrorKind::kConfig, key_path(options, given.key) + ": " + given.text +
                                        " is out of range; expected " + describe(range));
  return *value;
}

int64_t to_int(const Options& options, const Given& given, const IntRange& range) {
  std::optional<int64_t> value = parse<int64_t>(given.text);
  if (!value)
    throw Error(ErrorKind::kConfig, key_path(options, given.key) + ": expected " + describe(range) +
                                        ", found '" + given.text + "'");
  if (*value < range.min || *value > range.max)
    throw Error(ErrorKind::kConfig, key_path(options, given.key) + ": " + given.text +
                                        " is out of range; expected " + describe(range));
  return *value;
}

}  // namespace

std::string key_path(const Options& options, const std::string& key) {
  return options.path().empty() ? key : options.path() + "." + key;
}

std::optional<double> primary_real(const Options& options, const std::string& name,
                                   const RealRange& range) {
  std::optional<Given> given = primary_text(options, name);
  if (!given) return std::nullopt;
  return to_real(options, *given, range);
}

std::optional<int64_t> primary_int(const Options& options, const std::string& name,
                                   const IntRange& range) {
  std::optional<Given> given = primary_text(options, name);
  if (!given) return std::nullopt;
  return to_int(options, *given, range);
}

int64_t int_option(const Options& options, const std::string& key, int64_t fallback,
                   const IntRange& range) {
  std::optional<Given> given = given_text(options, key);
  return given ? to_int(options, *given, range) : fallback;
}

void require_primary(bool given, const Options& options, const std::string& link,
                     const std::string& name, const std::string& example_value) {
  if (!given)
    throw Error(ErrorKind::kConfig, options.path() + ": missing option '" + name + "'; write '- " +
                                        link + ": " + example_value + "' or '- " + link + ": {" +
                                        name + ": " + example_value + "}'");
}

}  // namespace duet::samplers
