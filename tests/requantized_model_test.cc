// SmolLM2 re-quantized by `duet quantize` (the fixture test
// requantized_smollm2 writes q4_k_m, q6_k and q5_0 files from the Q4_1 file;
// dequantizing is exact, so they equal files made from an f32 copy): the
// onednn backend's greedy tokens must be the reference backend's.
//
// The reference backend checks onednn's 32 greedy tokens by teacher forcing:
// one prefill of prompt + generated tokens with every position's logits, whose
// argmax must be the token onednn chose next. That is the reference's own
// greedy choice (its prefill and decode logits agree:
// SmolLM2.PrefillThenDecodeEqualsALongerPrefill) at a third of the cost of
// decoding token by token. bench/greedy_vs_llama_cpp.py runs ten prompts
// against llama.cpp too (docs/performance.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "duet/app/pipeline.h"

namespace duet {
namespace {

namespace fs = std::filesystem;

class NullSink final : public TextSink {
 public:
  void on_text(std::string_view) override {}
};

class RequantizedModel : public ::testing::TestWithParam<std::string> {
 protected:
  // onednn generates 32 tokens; the reference only prefills (with every
  // position's logits) and takes one token.
  std::unique_ptr<Pipeline> build(const std::string& plugin, bool teacher) {
    const fs::path model =
        fs::path(DUET_BUILD_DIR) / "requantized" / ("smollm2-" + GetParam() + ".gguf");
    if (!fs::exists(model)) {
      ADD_FAILURE() << model << " is missing: the fixture test requantized_smollm2 writes it";
      return nullptr;
    }
    const std::vector<std::string> overrides = {
        "model.path=" + model.string(),
        "backend.plugin=" + plugin,
        "components.kv_cache.dtype=f32",
        std::string("stages.0.prefill.all_logits=") + (teacher ? "true" : "false"),
        std::string("stages.1.decode.max_new_tokens=") + (teacher ? "1" : "32"),
        "stages.1.decode.stop=[]"};
    PipelineConfig config = load_pipeline_config(
        fs::path(DUET_SOURCE_DIR) / "configs/smollm2-reference.yaml", overrides);
    load_pipeline_plugins(config, host_);
    return Pipeline::build(config, host_);
  }

  PluginHost host_;
};

TEST_P(RequantizedModel, OnednnGreedyTokensAreTheReferenceBackends) {
  std::unique_ptr<Pipeline> onednn = build("onednn", false);
  std::unique_ptr<Pipeline> reference = build("reference", true);
  ASSERT_TRUE(onednn && reference);
  const int32_t vocab = reference->check().hparams.n_vocab;
  for (const char* prompt : {"The capital of France is", "Once upon a time, in a small village"}) {
    NullSink sink;
    const std::vector<int32_t> ids = onednn->tokenizer().encode(prompt, false);
    const RunResult got = onednn->run_tokens(ids, sink);
    ASSERT_FALSE(got.generated_tokens.empty()) << prompt;
    // Teacher forcing: the reference's logits after every token of
    // prompt + generated (but the last) must pick the next generated token.
    std::vector<int32_t> forced = ids;
    forced.insert(forced.end(), got.generated_tokens.begin(), got.generated_tokens.end() - 1);
    const RunResult want = reference->run_tokens(forced, sink);
    ASSERT_GE(want.prompt_logits.size(), forced.size() * static_cast<size_t>(vocab)) << prompt;
    for (size_t i = 0; i < got.generated_tokens.size(); ++i) {
      const float* row =
          want.prompt_logits.data() + (ids.size() - 1 + i) * static_cast<size_t>(vocab);
      const auto best = static_cast<int32_t>(std::max_element(row, row + vocab) - row);
      ASSERT_EQ(got.generated_tokens[i], best)
          << GetParam() << " '" << prompt << "': generated token " << i << " differs";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(SmolLM2, RequantizedModel, ::testing::Values("q4_k_m", "q6_k", "q5_0"),
                         [](const auto& p) { return p.param; });

}  // namespace
}  // namespace duet
