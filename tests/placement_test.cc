// Stages on different backends (`backends:`) on the real model: a split
// pipeline generates what the decode backend alone does, its decode-step
// logits within the model tests' thresholds.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "duet/app/pipeline.h"
#include "model_files.h"

namespace duet {
namespace {

namespace fs = std::filesystem;

// Normalised MSE of `got` against `want`.
double nmse(std::span<const float> got, std::span<const float> want) {
  double err = 0.0, ref = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    err += (double{got[i]} - want[i]) * (double{got[i]} - want[i]);
    ref += double{want[i]} * want[i];
  }
  return err / ref;
}

class Placement : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(testing::model_path()))
      FAIL() << testing::missing_model_message(testing::model_path());
  }

  // Prefill on backend `first`, decode on `second`, caches of the dtypes
  // given; with the same backend and dtype twice, one backend runs both
  // stages: "the decode backend alone".
  std::unique_ptr<Pipeline> make(const std::string& first, const std::string& first_dtype,
                                 const std::string& second, const std::string& second_dtype,
                                 int32_t new_tokens) {
    const bool alone = first == second && first_dtype == second_dtype;
    const std::string yaml =
        "model: {path: '" + testing::model_path().string() + "', chat: true}\nbackends:\n" +
        "  a: {plugin: " + first + ", kv_cache: {dtype: " + first_dtype + "}}\n" +
        (alone ? "" : "  b: {plugin: " + second + ", kv_cache: {dtype: " + second_dtype + "}}\n") +
        R"(
components:
  kv_cache: {capacity_tokens: 512}
  sampler: {seed: 42, chain: [greedy]}
stages:
  - prefill: {backend: a}
  - decode: {backend: )" +
        (alone ? "a" : "b") + ", max_new_tokens: " + std::to_string(new_tokens) + ", stop: []}\n";
    PipelineConfig config = parse_pipeline_config(yaml, "placement.yaml", DUET_SOURCE_DIR, {});
    load_pipeline_plugins(config, host_);
    return Pipeline::build(config, host_);
  }

  PluginHost host_;
  NullSink sink_;
};

const std::vector<std::string> kPrompts = {
    "What is the capital of France?",
    "Write a haiku about the sea.",
    "List three primary colours.",
};

// Both directions between the CPU backends: the greedy tokens of the
// decode backend alone, one handover per run.
TEST_F(Placement, ASplitPipelineGeneratesWhatTheDecodeBackendAloneDoes) {
  for (const auto& [prefill, decode] :
       {std::pair{"onednn", "reference"}, std::pair{"reference", "onednn"}}) {
    auto split = make(prefill, "f16", decode, "f16", 8);
    auto alone = make(decode, "f16", decode, "f16", 8);
    for (const std::string& prompt : kPrompts) {
      SCOPED_TRACE(std::string(prefill) + " -> " + decode + ": " + prompt);
      const RunResult got = split->run(prompt, sink_);
      const RunResult want = alone->run(prompt, sink_);
      EXPECT_EQ(got.generated_tokens, want.generated_tokens);
      EXPECT_EQ(got.stats.handovers, 1);
      EXPECT_GT(got.stats.handover_bytes, 0u);
      EXPECT_EQ(want.stats.handovers, 0);
    }
  }
}

// After the handover, each decode step on the receiving backend: its
// logits against the decode backend's own run over the same tokens, at the
// thresholds of tests/onednn_model_test.cc (1e-4 for f16 caches) and 4e-3
// where both store q8_0 and the two q8_0 caches may round a value to
// neighbouring steps. That spread is heavy-tailed: over the three prompts
// here × these 6 tokens, onednn -> reference measured at most 1.7e-3 with
// the gemv kernels (mean 4.6e-4) and 2.7e-3 with the row tiles onednn takes
// on AVX-512 VNNI CPUs (mean 7.1e-4), while the same steps with f16 caches
// stay ≤ 1.6e-6 for both: the products agree, the q8_0 roundings differ.
TEST_F(Placement, DecodeStepLogitsAfterAHandoverMatchTheDecodeBackendAlone) {
  struct Case {
    const char *prefill, *decode, *dtype;  // both caches
    double threshold;
  };
  for (const Case& c :
       {Case{"onednn", "reference", "f16", 1e-4}, Case{"reference", "onednn", "f16", 1e-4},
        Case{"onednn", "reference", "q8_0", 4e-3}}) {
    SCOPED_TRACE(std::string(c.prefill) + " -> " + c.decode + ", " + c.dtype);
    // Both sessions stand on the decode backend with the prompt cached —
    // the split one's prefilled on the other backend and handed over — and
    // are fed the same tokens from there.
    auto split = make(c.prefill, c.dtype, c.decode, c.dtype, 1);
    auto alone = make(c.decode, c.dtype, c.decode, c.dtype, 1);
    const std::vector<int32_t> ids = split->tokenize_prompt(kPrompts[0]);
    const auto n = static_cast<int32_t>(ids.size());
    auto a = split->new_session(ids);
    auto b = alone->new_session(ids);
    a->forward(n, false);
    split->move_to_stage(*a, 1);
    b->forward(n, false);
    for (int32_t token : {504, 3575, 282, 4649, 314, 7042}) {
      a->append(token);
      b->append(token);
      a->forward(1, false);
      b->forward(1, false);
      EXPECT_LE(nmse(a->logits(), b->logits()), c.threshold) << "after token " << token;
    }
  }
}

// The GPU placements (the cuda backend stores f32 caches only): prefill on
// cuda with decode on onednn, and the reverse, generate what the decode
// backend alone does. Without a usable GPU the cuda plugin's probe refuses
// it, and the test says why.
TEST_F(Placement, PrefillAndDecodeSplitBetweenCudaAndOnednn) {
  load_pipeline_plugins(parse_pipeline_config("model: {path: m.gguf}\nstages: [decode]\n",
                                              "probe.yaml", DUET_SOURCE_DIR, {}),
                        host_);
  for (const PluginRecord& r : host_.records()) {
    if (r.name == "cuda" && !r.loaded) GTEST_SKIP() << "cuda plugin refused: " << r.refusal;
  }
  if (!host_.has(ComponentKind::kBackend, "cuda")) GTEST_SKIP() << "the cuda plugin is not built";
  for (const auto& [prefill, decode] : {std::pair{"cuda", "onednn"}, std::pair{"onednn", "cuda"}}) {
    auto split = make(prefill, "f32", decode, "f32", 8);
    auto alone = make(decode, "f32", decode, "f32", 8);
    for (const std::string& prompt : kPrompts) {
      SCOPED_TRACE(std::string(prefill) + " -> " + decode + ": " + prompt);
      const RunResult got = split->run(prompt, sink_);
      EXPECT_EQ(got.generated_tokens, alone->run(prompt, sink_).generated_tokens);
      EXPECT_EQ(got.stats.handovers, 1);
    }
  }
}

}  // namespace
}  // namespace duet
