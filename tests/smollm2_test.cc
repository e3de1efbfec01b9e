// The real model, SmolLM2-135M-Instruct Q4_1, through the default pipeline
// on the reference backend: answers, invariants, reproducibility.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "duet/app/pipeline.h"
#include "duet/error.h"

namespace duet {
namespace {

namespace fs = std::filesystem;

class SmolLM2 : public ::testing::Test {
 protected:
  std::unique_ptr<Pipeline> make(std::vector<std::string> overrides = {}) {
    const fs::path model = fs::path(DUET_SOURCE_DIR) / "models/SmolLM2-135M-Instruct.Q4_1.gguf";
    if (!fs::exists(model)) {
      ADD_FAILURE() << model << " is missing; run `bash scripts/fetch-model.sh`";
      return nullptr;
    }
    PipelineConfig config = load_pipeline_config(
        fs::path(DUET_SOURCE_DIR) / "configs/smollm2-reference.yaml", overrides);
    load_pipeline_plugins(config, host_);
    return Pipeline::build(config, host_);
  }

  PluginHost host_;
  NullSink sink_;
};

float max_abs_diff(std::span<const float> a, std::span<const float> b) {
  EXPECT_EQ(a.size(), b.size());
  float m = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

TEST_F(SmolLM2, GreedyAnswerToTheCapitalOfFranceMentionsParis) {
  auto p = make({"stages.1.decode.max_new_tokens=32"});
  ASSERT_TRUE(p);
  RunResult r = p->run("What is the capital of France?", sink_);
  EXPECT_NE(r.text.find("Paris"), std::string::npos) << "answer: " << r.text;
  EXPECT_EQ(r.stats.generated_tokens, static_cast<int32_t>(r.generated_tokens.size()));
}

TEST_F(SmolLM2, PrefillThenDecodeEqualsALongerPrefill) {
  auto p = make();
  ASSERT_TRUE(p);
  const auto ids = p->tokenize_prompt("The quick brown fox jumps over the lazy dog because");
  const auto n = static_cast<int32_t>(ids.size());
  auto whole = p->new_session(ids);
  whole->forward(n, false);
  std::vector<float> expected(whole->logits().begin(), whole->logits().end());
  whole.reset();
  auto split = p->new_session(ids);
  split->forward(n - 1, false);
  split->forward(1, false);
  EXPECT_LE(max_abs_diff(split->logits(), expected), 1e-4f);
}

TEST_F(SmolLM2, ChunkedPrefillEqualsOneShotPrefill) {
  const std::string prompt = "Write a haiku about the sea and the wind over it.";
  auto one_shot = make({"stages.0.prefill.all_logits=true", "stages.1.decode.max_new_tokens=4"});
  ASSERT_TRUE(one_shot);
  RunResult a = one_shot->run(prompt, sink_);
  one_shot.reset();
  auto chunked = make({"stages.0.prefill.all_logits=true", "stages.0.prefill.chunk_tokens=7",
                       "stages.1.decode.max_new_tokens=4"});
  RunResult b = chunked->run(prompt, sink_);
  EXPECT_LE(max_abs_diff(a.prompt_logits, b.prompt_logits), 1e-4f);
  EXPECT_EQ(a.generated_tokens, b.generated_tokens);
}

TEST_F(SmolLM2, TheSameSeedGivesTheSameTextAndAnotherSeedDifferentText) {
  // An empty chain draws from the softmax of the logits: temperature 1.
  auto sample = [&](const std::string& seed) {
    auto p = make({"components.sampler.chain=[]", "components.sampler.seed=" + seed,
                   "stages.1.decode.max_new_tokens=16"});
    return p ? p->run("Tell me a story.", sink_).text : std::string();
  };
  const std::string a = sample("11");
  EXPECT_FALSE(a.empty());
  EXPECT_EQ(a, sample("11"));
  EXPECT_NE(a, sample("12"));
}

TEST_F(SmolLM2, APromptLongerThanTheCacheIsRejected) {
  auto p = make({"components.kv_cache.capacity_tokens=32"});
  ASSERT_TRUE(p);
  std::string prompt;
  for (int i = 0; i < 40; ++i) prompt += "word ";
  try {
    p->run(prompt, sink_);
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInputRejected);
    EXPECT_NE(std::string(e.what()).find("but the KV cache has room for 32"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace duet
