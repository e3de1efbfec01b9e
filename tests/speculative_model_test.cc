// The lookup_decode stage on the real model: token for token the plain
// decode stage's greedy output, raw and chat, on each CPU backend, and more
// than one token per forward pass where the answer copies the prompt.
#include <gtest/gtest.h>

#include <filesystem>

#include "duet/app/pipeline.h"
#include "duet/app/scheduler.h"
#include "model_files.h"

namespace duet {
namespace {

namespace fs = std::filesystem;

constexpr const char* kCode =
    R"(Rename the function `add_numbers` to `sum_values` in this Python code and repeat the whole code:

```python
def add_numbers(values):
    total = 0
    for value in values:
        if value is None:
            continue
        total += value
    return total
```)";

class SpeculativeModel : public ::testing::TestWithParam<std::string> {
 protected:
  std::unique_ptr<Pipeline> make(const std::string& stage, bool chat,
                                 std::vector<std::string> overrides = {}) {
    if (!fs::exists(testing::model_path())) {
      ADD_FAILURE() << testing::missing_model_message(testing::model_path());
      return nullptr;
    }
    const std::string yaml = "model: {path: '" + testing::model_path().string() +
                             "', chat: " + (chat ? "true" : "false") +
                             "}\nbackend: {plugin: " + GetParam() + R"(}
components:
  kv_cache: {capacity_tokens: 1024, dtype: f16}
  sampler: {seed: 42, chain: [greedy]}
stages:
  - prefill: {}
  - )" + stage + "\n";
    PipelineConfig config =
        parse_pipeline_config(yaml, "speculative.yaml", DUET_SOURCE_DIR, std::move(overrides));
    load_pipeline_plugins(config, host_);
    return Pipeline::build(config, host_);
  }

  PluginHost host_;
  NullSink sink_;
};

TEST_P(SpeculativeModel, GreedyOutputEqualsThePlainDecodeStageRawAndChat) {
  const std::vector<std::string> prompts = {
      kCode,
      "The quick brown fox jumps over the lazy dog. The quick brown fox",
      "List the days of the week: Monday, Tuesday, Wednesday, Thursday,",
      "What is the capital of France?",
      "Write a short story about a lighthouse keeper.",
      "Summarise: The cat sat on the mat. The dog sat on the rug. The cat and the dog sat.",
  };
  // The reference backend decodes ~20x slower: the first three prompts and
  // 16 tokens there (about a minute in all), enough for drafts to be
  // verified and rolled back.
  const bool reference = GetParam() == "reference";
  const size_t n_prompts = reference ? 3 : prompts.size();
  const std::string tokens_option = reference ? "{max_new_tokens: 16}" : "{max_new_tokens: 64}";
  for (bool chat : {false, true}) {
    auto plain = make("decode: " + tokens_option, chat);
    auto spec = make("lookup_decode: " + tokens_option, chat);
    ASSERT_TRUE(plain && spec);
    int32_t passes = 0, tokens = 0;
    for (size_t i = 0; i < n_prompts; ++i) {
      const std::string& prompt = prompts[i];
      RunResult a = plain->run(prompt, sink_);
      RunResult b = spec->run(prompt, sink_);
      EXPECT_EQ(a.generated_tokens, b.generated_tokens)
          << GetParam() << (chat ? " chat" : " raw") << ": " << prompt;
      EXPECT_EQ(a.text, b.text);
      passes += b.stats.decode_passes;
      tokens += b.stats.generated_tokens - 1;
    }
    // Drafts were kept: copying prompts take fewer passes than tokens.
    EXPECT_LT(passes * (reference ? 1 : 5), tokens * (reference ? 1 : 4))
        << passes << " passes for " << tokens << " tokens";
  }
}

// Under the scheduler, batching.draft_rows bounds a step's decode rows with
// drafts: a repetitive prompt verifies several draft tokens a pass with 16,
// at most one with 2; the tokens are the same. On onednn only
// (the reference backend's scheduler drafts are speculative_test's).
using SpeculativeModelScheduler = SpeculativeModel;

TEST_P(SpeculativeModelScheduler, DraftRowsBoundTheDraftsOfAStep) {
  const auto run = [&](const std::string& draft_rows) {
    auto p = make("lookup_decode: {max_new_tokens: 64}", false,
                  {"components.kv_cache.block_tokens=16", "batching.draft_rows=" + draft_rows});
    if (!p) return std::make_pair(std::vector<int32_t>{}, SchedulerStats{});  // failure added
    Scheduler scheduler(*p);
    Request r;
    r.id = "days";
    r.prompt = p->tokenize_prompt(
        "Monday, Tuesday, Wednesday, Thursday, Friday, Saturday, Sunday, Monday, Tuesday,");
    scheduler.submit(std::move(r));
    scheduler.run();
    std::vector<RequestResult> done = scheduler.take_finished();
    EXPECT_EQ(done.size(), 1u);
    return std::make_pair(done.at(0).generated_tokens, scheduler.stats());
  };
  const auto [wide, wide_stats] = run("16");
  const auto [narrow, narrow_stats] = run("2");
  EXPECT_EQ(narrow, wide);
  EXPECT_GT(wide_stats.draft_tokens, wide_stats.steps);
  EXPECT_GT(narrow_stats.accepted_draft_tokens, 0);
  EXPECT_LE(narrow_stats.draft_tokens, narrow_stats.steps);
}

INSTANTIATE_TEST_SUITE_P(Backends, SpeculativeModel, ::testing::Values("reference", "onednn"),
                         [](const auto& p) { return p.param; });
INSTANTIATE_TEST_SUITE_P(Backends, SpeculativeModelScheduler, ::testing::Values("onednn"),
                         [](const auto& p) { return p.param; });

}  // namespace
}  // namespace duet
