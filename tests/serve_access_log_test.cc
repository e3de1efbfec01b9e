// The access-log lines of `duet serve` (core/serve/access_log.h).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "access_log.h"

namespace duet::serve {
namespace {

AccessEntry completion() {
  AccessEntry e;
  e.time = std::chrono::system_clock::time_point(std::chrono::milliseconds(1796239801123));
  e.method = "POST";
  e.target = "/v1/chat/completions";
  e.status = 200;
  e.seconds = 0.4121;
  e.id = "chatcmpl-duet-3";
  e.prompt_tokens = 37;
  e.completion_tokens = 8;
  e.first_token_seconds = 0.2104;
  e.finish_reason = "stop";
  return e;
}

TEST(ServeAccessLog, TextLine) {
  EXPECT_EQ(format_access_entry(completion(), AccessLogFormat::kText),
            "2026-12-02T19:30:01.123Z POST /v1/chat/completions 200 0.412s id=chatcmpl-duet-3 "
            "prompt=37 completion=8 ttft=0.210s finish=stop");
  AccessEntry probe = completion();
  probe.id.clear();
  probe.finish_reason.clear();
  probe.method = "GET";
  probe.target = "/he alth\n\xff";  // a client's bytes stay one word on one line
  probe.seconds = 0;
  EXPECT_EQ(format_access_entry(probe, AccessLogFormat::kText),
            "2026-12-02T19:30:01.123Z GET /he%20alth%0A%FF 200 0.000s");
  EXPECT_EQ(format_access_entry(probe, AccessLogFormat::kNone), "");
  AccessEntry refused = completion();
  refused.status = 400;
  refused.finish_reason.clear();  // answered before it ran
  EXPECT_EQ(format_access_entry(refused, AccessLogFormat::kText),
            "2026-12-02T19:30:01.123Z POST /v1/chat/completions 400 0.412s id=chatcmpl-duet-3");
}

TEST(ServeAccessLog, JsonLine) {
  const nlohmann::json j =
      nlohmann::json::parse(format_access_entry(completion(), AccessLogFormat::kJson));
  EXPECT_EQ(j, nlohmann::json::parse(R"({"time": "2026-12-02T19:30:01.123Z", "method": "POST",
      "path": "/v1/chat/completions", "status": 200, "seconds": 0.412, "id": "chatcmpl-duet-3",
      "prompt_tokens": 37, "completion_tokens": 8, "first_token_seconds": 0.21,
      "finish_reason": "stop"})"));
  AccessEntry probe = completion();
  probe.id.clear();
  probe.finish_reason.clear();
  probe.target = "/\xff";
  const nlohmann::json p =
      nlohmann::json::parse(format_access_entry(probe, AccessLogFormat::kJson));
  EXPECT_FALSE(p.contains("id"));
  EXPECT_EQ(p.at("path"), "/\xEF\xBF\xBD");
}

}  // namespace
}  // namespace duet::serve
