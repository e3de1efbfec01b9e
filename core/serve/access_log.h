// access_log.h — one line per answered request of `duet serve`
// (docs/serve.md#access-log): when, which route, the status, how long it
// took, and for a completion its id, tokens, time to first token and finish
// reason. Pure formatting; the handler writes the lines.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace duet::serve {

enum class AccessLogFormat { kNone, kText, kJson };

struct AccessEntry {
  std::chrono::system_clock::time_point time;  // when the request was read
  std::string method;
  std::string target;  // the path, query left out
  // The answer's status; 499 when the client went away before an answer
  // began (as nginx logs it).
  int status = 0;
  double seconds = 0.0;  // from the request read to the answer's end
  // Completions only: the id once the request was read (a refused one has
  // no more), the rest once it ran (finish_reason empty otherwise).
  std::string id;
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  double first_token_seconds = 0.0;  // from its arrival at the engine
  // "stop", "length", "cancelled" (shutdown), or "disconnected" when the
  // client went away before the answer's end.
  std::string finish_reason;
};

// The line for `e` without a newline: with kText
//   2026-12-02T19:30:01.123Z POST /v1/chat/completions 200 0.412s
//   id=chatcmpl-duet-3 prompt=37 completion=8 ttft=0.210s finish=stop
// (one line; a completion refused before it ran has its id and no token
// fields), with kJson one JSON object with the same fields; "" with kNone.
std::string format_access_entry(const AccessEntry& e, AccessLogFormat format);

}  // namespace duet::serve
