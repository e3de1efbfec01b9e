// Every registered architecture against the independent NumPy oracle
// (tests/oracle/llama_oracle.py): a small random-weight file of each, written
// by tests/tiny_model.h, run on the reference and onednn backends. Logits at
// every prompt position within NMSE 1e-6 of the oracle's float64 ones, and
// 32 greedy tokens equal to the oracle's greedy continuation.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "duet/app/pipeline.h"
#include "oracle_outputs.h"
#include "tiny_model.h"

namespace duet {
namespace {

namespace fs = std::filesystem;

constexpr int kGreedyTokens = 32;

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
    testing::write_tiny_llama(dir_ / "model.gguf", shape);

    std::vector<std::pair<std::string, std::vector<int32_t>>> input;
    for (const Prompt& p : prompts()) input.emplace_back(p.name, p.ids);
    fs::remove(dir_ / "oracle.json");  // the model was just written again
    const std::string error =
        testing::run_oracle(dir_ / "model.gguf", testing::oracle_input(input), dir_, kGreedyTokens);
    ASSERT_TRUE(error.empty()) << error;
  }

  std::unique_ptr<Pipeline> make(const std::string& backend) {
    const std::string yaml = "model: {path: model.gguf}\nbackend: {plugin: " + backend +
                             "}\n"
                             "components:\n"
                             "  kv_cache: {capacity_tokens: 128}\n"
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
  for (const char* backend : {"reference", "onednn"}) {
    std::unique_ptr<Pipeline> pipeline = make(backend);
    for (const Prompt& p : prompts()) {
      NullSink sink;
      const RunResult r = pipeline->run_tokens(p.ids, sink);
      const std::vector<float> oracle = testing::read_logits(dir_ / (p.name + ".logits.f32"));
      ASSERT_EQ(r.prompt_logits.size(), oracle.size()) << backend << " " << p.name;
      const double nmse = testing::logits_nmse(r.prompt_logits, oracle);
      std::printf("%s %-9s %-6s %2zu positions: logits NMSE %.3g\n", GetParam(), backend,
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

std::string arch_name(const ::testing::TestParamInfo<const char*>& param) { return param.param; }

INSTANTIATE_TEST_SUITE_P(Architectures, ArchitectureOracle,
                         ::testing::Values("llama", "llama3", "qwen2", "qwen3", "gemma3"),
                         arch_name);

}  // namespace
}  // namespace duet
