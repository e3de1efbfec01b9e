// `duet run --prompts-file` and `duet bench --batch` as a user meets them,
// on the tiny model and the reference backend: refused lines, results in
// file order, per-request settings, exit codes. No timing is asserted.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli_fixture.h"
#include "tiny_model.h"

namespace duet {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Greedy unless a test sets another chain; 16 blocks of 16 tokens.
std::string tiny_pipeline(const std::string& chain = "[greedy]") {
  return R"(model:
  path: tiny.gguf
backend:
  plugin: reference
components:
  kv_cache: {capacity_tokens: 256, block_tokens: 16}
  sampler:
    seed: 1
    chain: )" +
         chain + R"(
stages:
  - prefill: {chunk_tokens: 16}
  - decode: {max_new_tokens: 6}
batching: {max_sequences: 4, max_step_tokens: 32}
)";
}

using Result = testing::CommandResult;

class BatchCli : public testing::CliFixture {
 protected:
  // One JSON object per line of `text`.
  static std::vector<json> lines(const std::string& text) {
    std::vector<json> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
    return out;
  }
};

TEST_F(BatchCli, BadLinesAreReportedAndTheRestRunInFileOrder) {
  const std::string prompts =
      write("p.jsonl",
            "{\"id\": \"a\", \"prompt\": \"hello there\"}\n"
            "{\"prompt\": \"broken\"\n"
            "{\"id\": \"c\", \"prompt\": \"abacad\", \"max_tokens\": 2}\n"
            "{\"prompt\": \"hi\", \"max_tokenz\": 3}\n"
            "{\"messages\": [{\"role\": \"user\", \"content\": \"ab\"}]}\n");
  Result r = duet("run " + write("p.yaml", tiny_pipeline()) + " --prompts-file " + prompts);
  EXPECT_EQ(r.code, 6) << r.err;  // some lines were refused
  EXPECT_NE(r.err.find("p.jsonl:2: not valid JSON"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("p.jsonl:4: unknown key 'max_tokenz'; did you mean 'max_tokens'?"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("5 requests (2 refused)"), std::string::npos) << r.err;
  const std::vector<json> out = lines(r.out);
  ASSERT_EQ(out.size(), 5u) << r.out;
  EXPECT_EQ(out[0]["id"], "a");
  EXPECT_GT(out[0]["generated_tokens"].get<int>(), 0);
  EXPECT_EQ(out[1]["line"], 2);
  EXPECT_EQ(out[1]["id"], 2);  // the line number when the line gives none
  EXPECT_TRUE(out[1].contains("error"));
  EXPECT_EQ(out[2]["id"], "c");
  EXPECT_EQ(out[3]["line"], 4);
  EXPECT_TRUE(out[3].contains("error"));
  EXPECT_EQ(out[4]["id"], 5);
  for (size_t i : {0u, 2u, 4u}) {
    EXPECT_FALSE(out[i].contains("error")) << out[i];
    EXPECT_EQ(out[i]["token_ids"].size(), out[i]["generated_tokens"].get<size_t>()) << out[i];
    for (const char* key :
         {"text", "prompt_tokens", "finish_reason", "cached_prompt_tokens", "preemptions",
          "queued_s", "first_token_s", "total_s", "decode_tokens_per_s"}) {
      EXPECT_TRUE(out[i].contains(key)) << key << " in " << out[i];
    }
  }
}

// A number no double holds made nlohmann throw out_of_range, which the
// reader did not catch: the whole run ended with exit code 70 (found by
// serve_request_fuzz on the same reader).
TEST_F(BatchCli, ANumberBeyondADoubleRefusesItsLineOnly) {
  const std::string prompts = write("p.jsonl",
                                    "{\"prompt\": \"hi\", \"max_tokens\": 1e999}\n"
                                    "{\"prompt\": \"hello\", \"max_tokens\": 2}\n");
  Result r = duet("run " + write("p.yaml", tiny_pipeline()) + " --prompts-file " + prompts);
  EXPECT_EQ(r.code, 6) << r.err;
  EXPECT_NE(r.err.find("p.jsonl:1: not valid JSON: number overflow parsing '1e999'"),
            std::string::npos)
      << r.err;
  const std::vector<json> out = lines(r.out);
  ASSERT_EQ(out.size(), 2u) << r.out;
  EXPECT_TRUE(out[0].contains("error"));
  EXPECT_EQ(out[1]["generated_tokens"], 2);
}

// A line whose sampler chain throws mid-generation (a plugin link) fails
// alone: its result names the link, the others finish, and the exit code is
// the error's (6, the link threw kInputRejected).
TEST_F(BatchCli, ALineWhoseChainThrowsFailsAlone) {
  const std::string prompts =
      write("p.jsonl",
            "{\"prompt\": \"hello\"}\n"
            "{\"prompt\": \"hello\", \"sampler\": {\"test_throw\": {\"from_step\": 2}}}\n"
            "{\"prompt\": \"abacad\"}\n");
  const std::string pipeline =
      write("p.yaml", tiny_pipeline("[{test_throw: {from_step: 1000}}, greedy]") +
                          "plugins: {paths: [" DUET_TEST_PLUGIN_DIR "]}\n");
  Result r = duet("run " + pipeline + " --prompts-file " + prompts);
  EXPECT_EQ(r.code, 6) << r.err;
  EXPECT_NE(r.err.find("p.jsonl:2: sampler 'test_throw' (plugin 'test-good', "
                       "components.sampler.chain[0]): test_throw rejects step 2"),
            std::string::npos)
      << r.err;
  const std::vector<json> out = lines(r.out);
  ASSERT_EQ(out.size(), 3u) << r.out;
  EXPECT_EQ(out[1]["finish_reason"], "failed");
  EXPECT_EQ(out[1]["generated_tokens"], 2);
  EXPECT_TRUE(out[1].contains("error"));
  for (size_t i : {0u, 2u}) {
    EXPECT_FALSE(out[i].contains("error")) << out[i];
    EXPECT_EQ(out[i]["generated_tokens"], 6) << out[i];
  }
}

TEST_F(BatchCli, OutputFileAndPerRequestMaxTokens) {
  const std::string prompts = write("p.jsonl",
                                    "{\"id\": \"two\", \"prompt\": \"hello\", \"max_tokens\": 2}\n"
                                    "{\"id\": \"five\", \"prompt\": \"hello\", "
                                    "\"max_new_tokens\": 5}\n");
  const fs::path results = dir_ / "results.jsonl";
  Result r = duet("run " + write("p.yaml", tiny_pipeline()) + " --prompts-file " + prompts +
                  " --output " + results.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  const std::vector<json> out = lines(slurp(results));
  ASSERT_EQ(out.size(), 2u);
  // A request that no end-of-generation token stops ends at its own limit.
  for (const auto& [index, limit] : {std::pair{0, 2}, std::pair{1, 5}}) {
    const json& o = out[static_cast<size_t>(index)];
    if (o["finish_reason"] == "length") {
      EXPECT_EQ(o["generated_tokens"], limit) << o;
    } else {
      EXPECT_LE(o["generated_tokens"].get<int>(), limit) << o;
    }
  }
  EXPECT_EQ(out[0]["finish_reason"], "length") << out[0];
}

TEST_F(BatchCli, SeededRequestGivesTheSameTokensAloneAndAmongOthers) {
  const std::string pipeline =
      write("p.yaml", tiny_pipeline("[{top_k: 40}, {temperature: 1.5}, dist]"));
  const std::string request =
      "{\"id\": \"x\", \"prompt\": \"abacadae\", \"seed\": 7, \"max_tokens\": 6}\n";
  Result alone = duet("run " + pipeline + " --prompts-file " + write("alone.jsonl", request));
  ASSERT_EQ(alone.code, 0) << alone.err;
  Result among = duet("run " + pipeline + " --prompts-file " +
                      write("among.jsonl",
                            "{\"prompt\": \"hello there, a longer prompt\", \"seed\": 1}\n"
                            "{\"prompt\": \"ab\", \"temperature\": 0.5, \"top_k\": 3}\n" +
                                request + "{\"prompt\": \"ac ad\", \"seed\": 9}\n"));
  ASSERT_EQ(among.code, 0) << among.err;
  const json a = lines(alone.out).at(0);
  const json b = lines(among.out).at(2);
  EXPECT_EQ(b["id"], "x");
  EXPECT_EQ(a["token_ids"], b["token_ids"]) << a << "\n" << b;
  EXPECT_EQ(a["text"], b["text"]);
  EXPECT_EQ(a["generated_tokens"], 6) << a;  // sampled, not cut short
}

TEST_F(BatchCli, SamplerSettingForALinkThePipelineLacksIsRefused) {
  Result r = duet("run " + write("p.yaml", tiny_pipeline()) + " --prompts-file " +
                  write("p.jsonl", "{\"prompt\": \"ab\", \"top_p\": 0.9}\n"));
  EXPECT_EQ(r.code, 6);
  EXPECT_NE(r.err.find("p.jsonl:1: top_p: the pipeline's sampler chain has no 'top_p' link "
                       "(it has: greedy)"),
            std::string::npos)
      << r.err;
}

TEST_F(BatchCli, PromptsFileConflictsWithASinglePrompt) {
  const std::string pipeline = write("p.yaml", tiny_pipeline());
  const std::string prompts = write("p.jsonl", "{\"prompt\": \"ab\"}\n");
  for (const char* flag : {"--prompt hi", "--json", "--chat"}) {
    Result r = duet("run " + pipeline + " --prompts-file " + prompts + " " + flag);
    EXPECT_EQ(r.code, 2) << flag;
    EXPECT_NE(r.err.find("--prompts-file and --"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line: " << r.err;
  }
}

TEST_F(BatchCli, BenchBatchPrintsItsColumns) {
  Result r =
      duet("bench " + write("p.yaml", tiny_pipeline()) + " --batch 1,2 -p 8 -n 8 -r 1 --warmup 0");
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* text : {"| test", "agg t/s", "vs 1", "itl ms", "p50", "p99", "step ms",
                           "pp8+tg8@b1", "pp8+tg8@b2", "1.00x"}) {
    EXPECT_NE(r.out.find(text), std::string::npos) << text << " in\n" << r.out;
  }
  r = duet("bench " + write("p.yaml", tiny_pipeline()) +
           " --batch 2 -p 8 -n 8 -r 1 --warmup 0 -o json");
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["results"][0]["sequences"], 2);
  EXPECT_EQ(j["results"][0]["preemptions"], 0);
  EXPECT_EQ(j["results"][0]["prefix_hit_tokens"], 0);
}

TEST_F(BatchCli, BenchBatchNamesTheSettingThatMakesRoom) {
  Result r = duet("bench " + write("p.yaml", tiny_pipeline()) + " --batch 8 -p 8 -n 8");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--set batching.max_sequences=8"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace duet
