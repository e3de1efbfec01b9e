// `duet serve` on the tiny model and the reference backend, without the real
// model: its options are checked before anything loads, a pipeline that
// cannot batch stops it before it listens, and a server answers curl on
// 127.0.0.1 and exits 0 on SIGTERM. tests/serve_test.py covers the API on
// the real model.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli_fixture.h"
#include "tiny_model.h"

namespace duet {
namespace {

namespace fs = std::filesystem;

std::string tiny_pipeline(const std::string& kv_cache) {
  return R"(model:
  path: tiny.gguf
backend:
  plugin: reference
components:
  kv_cache: )" +
         kv_cache + R"(
  sampler: {chain: [{temperature: 0}]}
stages:
  - prefill: {chunk_tokens: 16}
  - decode: {max_new_tokens: 4}
batching: {max_sequences: 4, max_step_tokens: 32}
)";
}

using Result = testing::CommandResult;

// Follows a `"$DUET" serve ... 2>server.log &` line of a test's script: waits
// for the server to listen, and sets $pid and $port (exit 90 if it never does).
constexpr const char* kServerStarted = R"(
pid=$!
for _ in $(seq 300); do grep -q 'listening on' server.log && break; sleep 0.1; done
port=$(grep -o 'http://127.0.0.1:[0-9]*' server.log | cut -d: -f3)
[ -n "$port" ] || { cat server.log >&2; kill $pid; exit 90; }
)";

// Ends a test's script: /health's answer and "exit CODE" after SIGTERM on
// stdout, the server's log on stderr.
constexpr const char* kHealthThenStop = R"(
curl -sS --max-time 60 "http://127.0.0.1:$port/health"
echo
kill -TERM $pid
wait $pid
echo "exit $?"
cat server.log >&2
)";

class ServeCli : public testing::CliFixture {
 protected:
  void SetUp() override {
    CliFixture::SetUp();
    pipeline_ = write("p.yaml", tiny_pipeline("{capacity_tokens: 256, block_tokens: 16}"));
  }

  std::string pipeline_;
};

TEST_F(ServeCli, BadOptionsExit2NamingTheValue) {
  const std::pair<const char*, const char*> cases[] = {
      {"--port 70000", "--port 70000 is outside [0, 65535]"},
      {"--max-queue 0", "--max-queue 0 is outside [1, 1048576]"},
      {"--idle-timeout 0", "--idle-timeout 0 is outside [1, 3600]"},
      {"--shutdown-timeout -1", "--shutdown-timeout -1 is outside [0, 3600]"},
      {"--api-key ''", "--api-key is empty"},
      {"--host localhost", "--host localhost: not an IP address"},
      {"--port eighty", "duet serve: the argument ('eighty') for option '--port' is invalid"},
  };
  for (const auto& [args, message] : cases) {
    const Result r = bash("\"$DUET\" serve p.yaml " + std::string(args));
    EXPECT_EQ(r.code, 2) << args << ": " << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << args << ": " << r.err;
    EXPECT_EQ(r.err.find("listening"), std::string::npos) << r.err;
  }
}

TEST_F(ServeCli, APipelineThatCannotBatchStopsBeforeListening) {
  write("one_block.yaml", tiny_pipeline("{capacity_tokens: 256}"));
  const Result r = bash("\"$DUET\" serve one_block.yaml --port 0");
  EXPECT_EQ(r.code, 2) << r.err;
  // batching.max_sequences is 4 here: blocks of 64 give each its own.
  EXPECT_NE(r.err.find("set components.kv_cache.block_tokens to 64 or a smaller divisor"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("listening"), std::string::npos) << r.err;
}

// The server on a port of its own choosing, a completion and a health check
// through curl, then SIGTERM: exit code 0.
TEST_F(ServeCli, AnswersCurlAndExits0OnSigterm) {
  const Result r = bash(
      R"(
"$DUET" serve p.yaml --port 0 2>server.log &
)" + std::string(kServerStarted) +
      R"(curl -sS --max-time 60 "http://127.0.0.1:$port/v1/completions" -d '{"prompt": "hello", "max_tokens": 3}'
echo
)" + std::string(kHealthThenStop));
  ASSERT_EQ(r.code, 0) << r.err;
  std::istringstream lines(r.out);
  std::string completion, health, exit_line;
  std::getline(lines, completion);
  std::getline(lines, health);
  std::getline(lines, exit_line);
  const nlohmann::json c = nlohmann::json::parse(completion);
  EXPECT_EQ(c["object"], "text_completion");
  EXPECT_EQ(c["model"], "tiny");
  EXPECT_EQ(c["usage"]["completion_tokens"].get<int>() + c["usage"]["prompt_tokens"].get<int>(),
            c["usage"]["total_tokens"].get<int>());
  EXPECT_LE(c["usage"]["completion_tokens"].get<int>(), 3);
  EXPECT_EQ(nlohmann::json::parse(health)["status"], "ok");
  EXPECT_EQ(exit_line, "exit 0") << r.err;
  EXPECT_NE(r.err.find("SIGTERM: no new requests"), std::string::npos) << r.err;
}

// A request whose sampler chain throws (a plugin link) gets an error naming
// the link; the server stays healthy and answers the next request.
TEST_F(ServeCli, AFailingChainEndsItsRequestNotTheServer) {
  const Result r = bash(R"(
"$DUET" serve p.yaml --port 0 --set 'plugins.paths=[)" DUET_TEST_PLUGIN_DIR R"(]' \
  --set 'components.sampler.chain=[{test_throw: {from_step: 1000}}, {temperature: 0}]' \
  2>server.log &
)" + std::string(kServerStarted) +
                        R"(url="http://127.0.0.1:$port"
curl -sS --max-time 60 "$url/v1/completions" -w ' %{http_code}' \
  -d '{"prompt": "hello", "max_tokens": 3, "sampler": {"test_throw": {"from_step": 1}}}'
echo
curl -sS --max-time 60 "$url/v1/completions" -N \
  -d '{"prompt": "hello", "max_tokens": 3, "stream": true, "sampler": {"test_throw": {"from_step": 1}}}' | tr -d '\n'
echo
curl -sS --max-time 60 "$url/v1/completions" -w ' %{http_code}' -d '{"prompt": "hello", "max_tokens": 3}'
echo
)" + std::string(kHealthThenStop));
  ASSERT_EQ(r.code, 0) << r.err;
  std::istringstream lines(r.out);
  std::string failed, streamed, next, health, exit_line;
  std::getline(lines, failed);
  std::getline(lines, streamed);
  std::getline(lines, next);
  std::getline(lines, health);
  std::getline(lines, exit_line);
  // A duet::Error of kind kInputRejected from the link: 400.
  EXPECT_EQ(failed.substr(failed.size() - 4), " 400") << failed;
  const nlohmann::json error = nlohmann::json::parse(failed.substr(0, failed.size() - 4));
  EXPECT_EQ(error["error"]["code"], "sampler_failed") << failed;
  EXPECT_NE(error["error"]["message"].get<std::string>().find("test_throw rejects step 1"),
            std::string::npos)
      << failed;
  // Streamed, the first token went out; then an error event and [DONE].
  EXPECT_NE(streamed.find("\"error\""), std::string::npos) << streamed;
  EXPECT_NE(streamed.find("test_throw rejects step 1"), std::string::npos) << streamed;
  EXPECT_NE(streamed.find("data: [DONE]"), std::string::npos) << streamed;
  EXPECT_EQ(next.substr(next.size() - 4), " 200") << next;
  EXPECT_EQ(nlohmann::json::parse(health)["status"], "ok");
  EXPECT_EQ(exit_line, "exit 0") << r.err;
}

// --max-queue counts only requests beyond the batch's free places: four at
// once on an idle server with four places and a queue of one all run.
TEST_F(ServeCli, ABurstTheBatchCanTakeIsNotRefused) {
  const Result r = bash(R"(
"$DUET" serve p.yaml --port 0 --max-queue 1 2>server.log &
)" + std::string(kServerStarted) +
                        R"(pids=()
for i in 1 2 3 4; do
  curl -sS --max-time 60 -o /dev/null -w '%{http_code}\n' "http://127.0.0.1:$port/v1/completions" \
    -d '{"prompt": "hello", "max_tokens": 3}' &
  pids+=($!)
done
wait "${pids[@]}"
kill -TERM $pid
wait $pid
)");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "200\n200\n200\n200\n");
}

}  // namespace
}  // namespace duet
