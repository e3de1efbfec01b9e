#include "access_log.h"

#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>

namespace duet::serve {
namespace {

// UTC with milliseconds: 2026-12-02T19:30:01.123Z.
std::string iso_time(std::chrono::system_clock::time_point t) {
  const auto since_epoch = t.time_since_epoch();
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(since_epoch);
  const auto millis =
      std::chrono::duration_cast<std::chrono::milliseconds>(since_epoch - seconds).count();
  const std::time_t whole = seconds.count();
  std::tm utc{};
  gmtime_r(&whole, &utc);
  char text[96];  // room for any int, as the compiler counts
  std::snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", utc.tm_year + 1900,
                utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec,
                static_cast<int>(millis));
  return text;
}

std::string fixed3(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f", v);
  return text;
}

// A client's path as one word of the text line: bytes outside printable
// ASCII, and spaces, as %XX.
std::string one_word(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (c > 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char hex[4];
      std::snprintf(hex, sizeof hex, "%%%02X", c);
      out += hex;
    }
  }
  return out;
}

}  // namespace

std::string format_access_entry(const AccessEntry& e, AccessLogFormat format) {
  if (format == AccessLogFormat::kNone) return "";
  if (format == AccessLogFormat::kJson) {
    nlohmann::json j = {{"time", iso_time(e.time)},
                        {"method", e.method},
                        {"path", e.target},
                        {"status", e.status},
                        {"seconds", std::stod(fixed3(e.seconds))}};
    if (!e.id.empty()) j["id"] = e.id;
    if (!e.finish_reason.empty()) {
      j["prompt_tokens"] = e.prompt_tokens;
      j["completion_tokens"] = e.completion_tokens;
      j["first_token_seconds"] = std::stod(fixed3(e.first_token_seconds));
      j["finish_reason"] = e.finish_reason;
    }
    // Paths come from clients: bytes that are not UTF-8 print as U+FFFD.
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  std::string line = iso_time(e.time) + " " + one_word(e.method) + " " + one_word(e.target) + " " +
                     std::to_string(e.status) + " " + fixed3(e.seconds) + "s";
  if (!e.id.empty()) line += " id=" + e.id;
  if (!e.finish_reason.empty()) {
    line += " prompt=" + std::to_string(e.prompt_tokens) +
            " completion=" + std::to_string(e.completion_tokens) +
            " ttft=" + fixed3(e.first_token_seconds) + "s finish=" + e.finish_reason;
  }
  return line;
}

}  // namespace duet::serve
