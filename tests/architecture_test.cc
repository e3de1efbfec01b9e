// Every registered architecture against the independent NumPy oracle
// (tests/oracle/llama_oracle.py): a small random-weight file of each, written
// by tests/tiny_model.h, run on the reference and onednn backends (onednn
// also batch-invariant). Logits at every prompt position within NMSE 1e-6 of
// the oracle's float64 ones, and 32 greedy tokens equal to the oracle's
// greedy continuation. Gemma 3's sliding window is 16 positions, which the
// long prompts and every continuation pass; Gemma 3 runs again with its
// window layers in rings (components.kv_cache.window_layers: ring) of 32
// slots, which the long prompts wrap around, in passes of at most 17 rows.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "duet/app/pipeline.h"
#include "duet/error.h"
#include "oracle_outputs.h"
#include "tiny_model.h"

namespace duet {
namespace {

namespace fs = std::filesystem;

constexpr int kGreedyTokens = 32;
constexpr int32_t kWindow = 16;  // gemma3's local layers: shorter than most runs here

struct Prompt {
  std::string name;
  std::vector<int32_t> ids;
};

std::vector<Prompt> prompts() {
  std::vector<Prompt> p = {{"short", {1, 40, 41, 42}}, {"long", {}}, {"repeat", {}}};
  for (int32_t i = 0; i < 40; ++i) p[1].ids.push_back(3 + (i * 37) % 317);
  for (int32_t i = 0; i < 24; ++i) p[2].ids.push_back(259 + i % 5);
  return p;
}

class ArchitectureOracle : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    // "llama3": llama with Llama 3.1+'s RoPE frequency factors.
    const std::string param = GetParam();
    const std::string arch = param == "llama3" ? "llama" : param;
    dir_ = fs::path(DUET_BUILD_DIR) / "architecture_oracle" / param;
    fs::create_directories(dir_);
    testing::TinyLlama shape;
    shape.architecture = arch;
    shape.rope_freqs = param == "llama3";
    shape.matrix_type = DType::kF32;
    // Qwen3's and Gemma 3's heads are wider than n_embd / n_heads.
    if (arch == "qwen3" || arch == "gemma3") shape.head_dim = 32;
    // Gemma 3's sixth layer is its first global one.
    if (arch == "gemma3") shape.n_layers = 6;
    shape.sliding_window = kWindow;
    testing::write_tiny_llama(dir_ / "model.gguf", shape);

    std::vector<std::pair<std::string, std::vector<int32_t>>> input;
    for (const Prompt& p : prompts()) input.emplace_back(p.name, p.ids);
    fs::remove(dir_ / "oracle.json");  // the model was just written again
    const std::string error =
        testing::run_oracle(dir_ / "model.gguf", testing::oracle_input(input), dir_, kGreedyTokens);
    ASSERT_TRUE(error.empty()) << error;
  }

  // `backend` is a backend's name, "onednn_invariant", or either of those
  // followed by " ring" for window rings.
  std::unique_ptr<Pipeline> make(std::string backend) {
    const bool ring = backend.ends_with(" ring");
    if (ring) backend.resize(backend.size() - 5);
    const std::string plugin =
        backend == "onednn_invariant" ? "onednn, options: {batch_invariant: true}" : backend;
    const std::string yaml = "model: {path: model.gguf}\nbackend: {plugin: " + plugin +
                             "}\n"
                             "components:\n"
                             "  kv_cache: {capacity_tokens: 128" +
                             (ring ? ", window_layers: ring" : "") +
                             "}\n"
                             "  sampler: {seed: 1, chain: [greedy]}\n"
                             "stages:\n"
                             "  - prefill: {all_logits: true}\n"
                             "  - decode: {max_new_tokens: " +
                             std::to_string(kGreedyTokens) + ", stop: []}\n";
    PipelineConfig config = parse_pipeline_config(yaml, "arch.yaml", dir_, {});
    load_pipeline_plugins(config, host_);
    return Pipeline::build(config, host_);
  }

  fs::path dir_;
  PluginHost host_;
};

TEST_P(ArchitectureOracle, LogitsAndGreedyTokensMatchTheOracleOnEveryBackend) {
  std::vector<std::string> backends = {"reference", "onednn", "onednn_invariant"};
  if (std::string(GetParam()) == "gemma3") {
    for (const char* ring : {"reference ring", "onednn ring", "onednn_invariant ring"})
      backends.push_back(ring);
  }
  for (const std::string& backend : backends) {
    std::unique_ptr<Pipeline> pipeline = make(backend);
    // 5 of the 6 layers have a window; rings of 32 slots for 16 sequences
    // would take more than the 128-slot cache, so only `ring` makes them.
    EXPECT_EQ(pipeline->check().window_cache.n_layers, backend.ends_with(" ring") ? 5 : 0);
    for (const Prompt& p : prompts()) {
      NullSink sink;
      const RunResult r = pipeline->run_tokens(p.ids, sink);
      const std::vector<float> oracle = testing::read_logits(dir_ / (p.name + ".logits.f32"));
      ASSERT_EQ(r.prompt_logits.size(), oracle.size()) << backend << " " << p.name;
      const double nmse = testing::logits_nmse(r.prompt_logits, oracle);
      std::printf("%s %-21s %-6s %2zu positions: logits NMSE %.3g\n", GetParam(), backend.c_str(),
                  p.name.c_str(), p.ids.size(), nmse);
      EXPECT_LE(nmse, 1e-6) << backend << " " << p.name;
      // Generation ends early only at the end-of-generation token, which the
      // oracle (which never stops) must have picked there too.
      const std::vector<int32_t> expected = testing::oracle_greedy(dir_ / "oracle.json", p.name);
      ASSERT_LE(r.generated_tokens.size(), expected.size());
      EXPECT_EQ(r.generated_tokens,
                std::vector<int32_t>(
                    expected.begin(),
                    expected.begin() + static_cast<std::ptrdiff_t>(r.generated_tokens.size())))
          << backend << " " << p.name;
      if (r.generated_tokens.size() < expected.size()) {
        EXPECT_EQ(r.finish, FinishReason::kStop) << backend << " " << p.name;
      }
    }
  }
}

// A plugin built against ABI 1.5 loads (its smaller AttentionSpec is that
// version's), its attention runs a model without sliding windows, and a
// model with them is refused naming the attention, its plugin and version.
TEST(SlidingWindows, AnAttentionBuiltBeforeWindowsRunsFullLayersAndRefusesWindowedOnes) {
  const fs::path dir = fs::path(DUET_BUILD_DIR) / "sliding_window_abi";
  fs::create_directories(dir);
  PluginHost host;
  const PluginRecord r = host.load(fs::path(DUET_TEST_PLUGIN_DIR) / "abi_1_5/duet-test-abi-1-5.so");
  ASSERT_TRUE(r.loaded) << r.refusal;
  const auto run = [&](const std::string& arch, const std::string& attention) {
    testing::TinyLlama shape;
    shape.architecture = arch;
    shape.sliding_window = kWindow;
    if (arch == "gemma3") shape.head_dim = 32;
    testing::write_tiny_llama(dir / (arch + ".gguf"), shape);
    const std::string yaml = "model: {path: " + arch +
                             ".gguf}\nbackend: {plugin: reference}\n"
                             "components:\n"
                             "  attention: {impl: " +
                             attention +
                             "}\n"
                             "  kv_cache: {capacity_tokens: 64}\n"
                             "  sampler: {seed: 1, chain: [greedy]}\n"
                             "stages:\n"
                             "  - prefill: {}\n"
                             "  - decode: {max_new_tokens: 24, stop: []}\n";
    PipelineConfig config = parse_pipeline_config(yaml, "abi.yaml", dir, {});
    load_pipeline_plugins(config, host);
    NullSink sink;
    const std::vector<int32_t> prompt = {1, 40, 41, 42};
    return Pipeline::build(config, host)->run_tokens(prompt, sink).generated_tokens;
  };
  EXPECT_EQ(run("llama", "test_abi_1_5_full"), run("llama", "full"));
  // The spec such a plugin copies ends before `window`: what lies after it
  // (a 3 here) is not read as one.
  EXPECT_EQ(run("llama", "test_abi_1_5_copied"), run("llama", "full"));
  EXPECT_FALSE(run("gemma3", "full").empty());
  try {
    run("gemma3", "test_abi_1_5_full");
    ADD_FAILURE() << "a 1.5 attention was given sliding-window layers";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kPlugin) << e.what();
    EXPECT_NE(std::string(e.what()).find(
                  "attention 'test_abi_1_5_full' (plugin 'test-abi-1-5', built against Duet ABI "
                  "1.5) cannot run gemma3's sliding-window layers (16 positions), which need ABI "
                  "1.6 or later (AttentionSpec::window); rebuild the plugin against this Duet SDK"),
              std::string::npos)
        << e.what();
  }
}

// With one attention per window, what a plugin's attention throws names
// the layers' window: Gemma 3's first layer is a local one.
TEST(SlidingWindows, AnAttentionsFailureNamesTheWindowOfItsLayers) {
  const fs::path dir = fs::path(DUET_BUILD_DIR) / "sliding_window_label";
  fs::create_directories(dir);
  PluginHost host;
  const PluginRecord r = host.load(fs::path(DUET_TEST_PLUGIN_DIR) / "duet-test-extensions.so");
  ASSERT_TRUE(r.loaded) << r.refusal;
  testing::TinyLlama shape;
  shape.architecture = "gemma3";
  shape.sliding_window = kWindow;
  shape.head_dim = 32;
  testing::write_tiny_llama(dir / "gemma3.gguf", shape);
  const std::string yaml =
      "model: {path: gemma3.gguf}\nbackend: {plugin: reference}\n"
      "components:\n"
      "  attention: {impl: test_throw_int}\n"
      "  kv_cache: {capacity_tokens: 64}\n"
      "  sampler: {seed: 1, chain: [greedy]}\n"
      "stages:\n"
      "  - prefill: {}\n"
      "  - decode: {max_new_tokens: 4, stop: []}\n";
  PipelineConfig config = parse_pipeline_config(yaml, "label.yaml", dir, {});
  load_pipeline_plugins(config, host);
  NullSink sink;
  try {
    Pipeline::build(config, host)->run_tokens(std::vector<int32_t>{1, 40, 41, 42}, sink);
    ADD_FAILURE() << "the attention's throw was not reported";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kPlugin) << e.what();
    EXPECT_EQ(std::string(e.what()),
              "attention 'test_throw_int' (plugin 'test-extensions', components.attention.impl, "
              "layers with a 16-position window) failed: it threw something that is not a "
              "std::exception");
  }
}

std::string arch_name(const ::testing::TestParamInfo<const char*>& param) { return param.param; }

INSTANTIATE_TEST_SUITE_P(Architectures, ArchitectureOracle,
                         ::testing::Values("llama", "llama3", "qwen2", "qwen3", "gemma3"),
                         arch_name);

}  // namespace
}  // namespace duet
