// Speculative decoding on the tiny random model (reference backend): the
// n-gram drafter, and the lookup_decode stage against the plain decode
// stage, one request at a time and batched. (The rollback of rejected
// draft positions is KVAllocator::truncate: kv_allocator_test.)
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>

#include "duet/app/pipeline.h"
#include "duet/app/scheduler.h"
#include "duet/error.h"
#include "ngram_draft.h"
#include "tiny_model.h"

namespace duet {
namespace {

namespace fs = std::filesystem;
using speculative::ngram_draft;
using speculative::NgramSpec;

TEST(NgramDraft, ProposesWhatFollowedTheLongestEarlierMatch) {
  // ... 1 2 3 [9 9] ... 5 2 3 [7 8 6] ... 2 3: "2 3" twice; "5 2 3" only once.
  const std::vector<int32_t> t = {1, 2, 3, 9, 9, 5, 2, 3, 7, 8, 6, 4, 5, 2, 3};
  EXPECT_EQ(ngram_draft(t, NgramSpec{2, 8}, 8), (std::vector<int32_t>{7, 8, 6}));
  EXPECT_EQ(ngram_draft(t, NgramSpec{2, 8}, 2), (std::vector<int32_t>{7, 8}));
  // A match of 2 (ngram_max) keeps the most recent occurrence: 2 3 -> 7 8.
  EXPECT_EQ(ngram_draft(t, NgramSpec{1, 2}, 8), (std::vector<int32_t>{7, 8}));
  EXPECT_TRUE(ngram_draft(t, NgramSpec{4, 8}, 8).empty());
  EXPECT_TRUE(ngram_draft(t, NgramSpec{1, 8}, 0).empty());
  EXPECT_TRUE(ngram_draft(std::vector<int32_t>{1, 2, 3}, NgramSpec{1, 8}, 8).empty());
  // A repeating sequence drafts its own continuation (the match overlaps).
  EXPECT_EQ(ngram_draft(std::vector<int32_t>{4, 4, 5, 4, 4, 5, 4}, NgramSpec{1, 8}, 8),
            (std::vector<int32_t>{4, 5, 4}));
}

class Speculative : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(testing::make_temp_dir("speculative"));
    testing::write_tiny_llama(*dir_ / "tiny.gguf");
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }

  PipelineConfig config(const std::string& decode, std::vector<std::string> overrides = {}) {
    const std::string yaml = R"(model: {path: tiny.gguf}
backend: {plugin: reference}
components:
  kv_cache: {capacity_tokens: 256, block_tokens: 4}
  sampler: {seed: 7, chain: [greedy]}
stages:
  - prefill: {}
  - )" + decode + "\n";
    PipelineConfig c = parse_pipeline_config(yaml, "test.yaml", *dir_, overrides);
    load_pipeline_plugins(c, host_);
    return c;
  }
  std::unique_ptr<Pipeline> make(const std::string& decode,
                                 std::vector<std::string> overrides = {}) {
    return Pipeline::build(config(decode, std::move(overrides)), host_);
  }

  // A prompt that repeats itself, so that drafts are found.
  static std::vector<int32_t> prompt(int32_t seed) {
    std::vector<int32_t> ids;
    for (int32_t i = 0; i < 24; ++i) ids.push_back(3 + (seed * 31 + (i % 9) * 37) % 300);
    return ids;
  }

  static inline fs::path* dir_ = nullptr;
  PluginHost host_;
  NullSink sink_;
};

// The random model rarely repeats itself, so its drafts are mostly rejected
// (the rollback path); speculative_model_test sees long drafts kept.
TEST_F(Speculative, LookupDecodeGivesThePlainDecodeTokensGreedyAndSampled) {
  for (const std::string chain : {"[greedy]", "[{top_k: 40}, {temperature: 0.9}]"}) {
    const std::vector<std::string> set = {"components.sampler.chain=" + chain};
    auto plain = make("decode: {max_new_tokens: 160}", set);
    auto spec = make("lookup_decode: {max_new_tokens: 160, ngram_min: 1, draft_tokens: 6}", set);
    for (int32_t seed = 0; seed < 6; ++seed) {
      RunResult a = plain->run_tokens(prompt(seed), sink_);
      RunResult b = spec->run_tokens(prompt(seed), sink_);
      EXPECT_EQ(a.generated_tokens, b.generated_tokens) << chain << ", prompt " << seed;
      EXPECT_EQ(a.text, b.text);
      EXPECT_EQ(a.finish, b.finish);
      EXPECT_EQ(a.stats.decode_passes, a.stats.generated_tokens - 1);
    }
  }
}

// Under the batching scheduler: 24 requests side by side, each verifying
// its own drafts in the shared passes (draft_rows lifted so that all of
// them draft), get the tokens and logits the plain decode loop gives them
// (the scheduler with stage decode, and the session path for some), with a
// roomy pool and with one small enough to preempt.
TEST_F(Speculative, TheSchedulerVerifiesEverySequencesDraftsAsItsPlainDecode) {
  for (const std::string chain : {"[greedy]", "[{top_k: 40}, {temperature: 0.9}]"}) {
    for (const std::string capacity : {"256", "96"}) {
      const std::vector<std::string> set = {
          "components.sampler.chain=" + chain, "components.kv_cache.capacity_tokens=" + capacity,
          "batching.max_sequences=24", "batching.draft_rows=65536"};
      auto plain = make("decode: {max_new_tokens: 40}", set);
      auto spec = make("lookup_decode: {max_new_tokens: 40, ngram_min: 1, draft_tokens: 6}", set);
      const auto run = [](Pipeline& pipeline, SchedulerStats& stats) {
        Scheduler scheduler(pipeline);
        for (int32_t i = 0; i < 24; ++i) {
          Request r;
          r.id = std::to_string(i);
          r.prompt = prompt(i % 8);  // some prompts twice: prefix-cache hits too
          r.settings.seed = 100 + static_cast<uint64_t>(i);
          r.settings.keep_logits = true;
          scheduler.submit(std::move(r));
        }
        scheduler.run();
        EXPECT_EQ(scheduler.used_blocks(), 0);
        stats = scheduler.stats();
        std::map<std::string, RequestResult> out;
        for (RequestResult& r : scheduler.take_finished()) out[r.id] = std::move(r);
        return out;
      };
      SchedulerStats plain_stats, spec_stats;
      const auto expected = run(*plain, plain_stats);
      const auto got = run(*spec, spec_stats);
      const std::string where = chain + ", capacity " + capacity;
      ASSERT_EQ(got.size(), 24u) << where;
      for (const auto& [id, r] : got) {
        const RequestResult& e = expected.at(id);
        EXPECT_EQ(r.generated_tokens, e.generated_tokens) << where << ", request " << id;
        EXPECT_EQ(r.text, e.text) << where << ", request " << id;
        EXPECT_EQ(r.finish, e.finish) << where << ", request " << id;
        EXPECT_EQ(r.logits, e.logits) << where << ", request " << id;
      }
      EXPECT_EQ(plain_stats.draft_tokens, 0);
      EXPECT_GT(spec_stats.draft_tokens, 0) << where;
      // Greedy, the random model repeats itself enough for drafts to be
      // kept; sampled, they are all rejected (the rollback path).
      if (chain == "[greedy]" && capacity == "256") {
        EXPECT_GT(spec_stats.accepted_draft_tokens, 0) << where;
        EXPECT_LT(spec_stats.steps, plain_stats.steps) << where << ": kept drafts save passes";
      }
      if (capacity == "96") {
        EXPECT_GT(spec_stats.preemptions, 0) << where;
      }
      // The session path, seed for seed.
      auto alone =
          make("decode: {max_new_tokens: 40}", {set[0], "components.sampler.seed=105", set[1]});
      EXPECT_EQ(alone->run_tokens(prompt(5), sink_).generated_tokens, got.at("5").generated_tokens)
          << where;
    }
  }
}

// batching.draft_rows 0 runs no drafts, and any bound keeps the plain
// loop's tokens (the random model drafts little: speculative_model_test
// checks the bound where drafts are long).
TEST_F(Speculative, DraftRowsBoundTheDraftsOfAStep) {
  const auto run = [&](const std::string& decode, const std::string& draft_rows) {
    auto pipeline = make(decode, {"batching.draft_rows=" + draft_rows});
    Scheduler scheduler(*pipeline);
    Request r;
    r.id = "0";
    r.prompt = prompt(3);
    scheduler.submit(std::move(r));
    scheduler.run();
    std::vector<RequestResult> done = scheduler.take_finished();
    EXPECT_EQ(done.size(), 1u);
    return std::make_pair(done.at(0).generated_tokens, scheduler.stats());
  };
  const std::string lookup = "lookup_decode: {max_new_tokens: 80, ngram_min: 1, draft_tokens: 6}";
  const auto [plain, plain_stats] = run("decode: {max_new_tokens: 80}", "16");
  const auto [wide, wide_stats] = run(lookup, "16");
  const auto [narrow, narrow_stats] = run(lookup, "2");
  const auto [none, none_stats] = run(lookup, "0");
  EXPECT_EQ(wide, plain);
  EXPECT_EQ(narrow, plain);
  EXPECT_EQ(none, plain);
  EXPECT_GT(wide_stats.draft_tokens, 0);
  EXPECT_LE(narrow_stats.draft_tokens, narrow_stats.steps);
  EXPECT_EQ(none_stats.draft_tokens, 0);
  EXPECT_EQ(none_stats.steps, plain_stats.steps);
}

TEST_F(Speculative, LookupDecodeStopsWhereDecodeStops) {
  // A stop string, max_new_tokens and a full cache, each reached mid-draft.
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"decode: {max_new_tokens: 13}", "lookup_decode: {max_new_tokens: 13, ngram_min: 1}"},
      {"decode: {max_new_tokens: 300}", "lookup_decode: {max_new_tokens: 300, ngram_min: 1}"},
  };
  for (const auto& [plain_stage, spec_stage] : cases) {
    auto plain = make(plain_stage, {"components.kv_cache.capacity_tokens=64"});
    auto spec = make(spec_stage, {"components.kv_cache.capacity_tokens=64"});
    RunResult a = plain->run_tokens(prompt(1), sink_);
    RunResult b = spec->run_tokens(prompt(1), sink_);
    EXPECT_EQ(a.generated_tokens, b.generated_tokens) << spec_stage;
    EXPECT_EQ(a.finish, FinishReason::kLength);
    EXPECT_EQ(b.finish, FinishReason::kLength);
  }
  auto probe = make("decode: {max_new_tokens: 40}");
  const std::string text = probe->run_tokens(prompt(2), sink_).text;
  // Two ASCII bytes well into the text, so the stop string is whole characters.
  size_t at = 8;
  auto ascii = [](char ch) { return ch >= 0x20 && ch < 0x7f && ch != '\''; };
  while (at + 1 < text.size() && !(ascii(text[at]) && ascii(text[at + 1]))) ++at;
  ASSERT_LT(at + 1, text.size()) << "the tiny model should produce some ASCII text: " << text;
  const std::string stop = "stop: '" + text.substr(at, 2) + "'}";
  RunResult a = make("decode: {max_new_tokens: 40, " + stop)->run_tokens(prompt(2), sink_);
  RunResult b = make("lookup_decode: {max_new_tokens: 40, ngram_min: 1, " + stop)
                    ->run_tokens(prompt(2), sink_);
  EXPECT_EQ(a.finish, FinishReason::kStop);
  EXPECT_EQ(a.text, b.text);
  EXPECT_EQ(a.generated_tokens, b.generated_tokens);
  EXPECT_EQ(b.finish, FinishReason::kStop);
}

TEST_F(Speculative, BadOptionsAreRefusedNamingTheKey) {
  for (const auto& [stage, needle] : std::vector<std::pair<std::string, std::string>>{
           {"lookup_decode: {draft_tokens: 0}", "draft_tokens"},
           {"lookup_decode: {ngram_min: 5, ngram_max: 4}", "ngram_min"},
           {"lookup_decode: {stop: \"\"}", "stop"},
           {"lookup_decode: {drafts: 3}", "drafts"}}) {
    try {
      make(stage);
      ADD_FAILURE() << stage << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kConfig);
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace duet
