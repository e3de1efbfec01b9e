// Gemma 3 270M Q4_K_M (the real file, run with no YAML: the default
// pipeline duet run MODEL.gguf builds) against the independent NumPy oracle
// (tests/oracle/llama_oracle.py, the weights dequantized by gguf-py): logits
// at every prompt position within NMSE 1e-6 and 16 greedy tokens equal, on
// the reference and onednn backends; and the answer is the sensible one.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "duet/app/pipeline.h"
#include "model_files.h"
#include "oracle_outputs.h"

namespace duet {
namespace {

namespace fs = std::filesystem;

constexpr int kGreedyTokens = 16;

struct Prompt {
  std::string name;
  std::string text;
  std::vector<int32_t> ids;
};

class Gemma3Model : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const fs::path model = testing::gemma_path();
    if (!fs::exists(model)) {
      setup_error_ = testing::missing_model_message(model);
      return;
    }
    host_ = new PluginHost;
    for (const char* backend : {"reference", "onednn"}) {
      PipelineConfig config = parse_pipeline_config(
          default_pipeline_yaml(model), "default pipeline", "",
          {std::string("backend.plugin=") + backend, "components.kv_cache.dtype=f32",
           "stages.0.prefill.all_logits=true",
           "stages.1.decode.max_new_tokens=" + std::to_string(kGreedyTokens),
           "stages.1.decode.stop=[]"});
      load_pipeline_plugins(config, *host_);
      pipelines_.push_back(Pipeline::build(config, *host_).release());
    }
    prompts_ = new std::vector<Prompt>{{"capital", "Paris is the capital of", {}},
                                       {"code", "def fibonacci(n):", {}}};
    std::vector<std::pair<std::string, std::vector<int32_t>>> input;
    for (Prompt& p : *prompts_) {
      p.ids = pipelines_[0]->tokenize_prompt(p.text);
      input.emplace_back(p.name, p.ids);
    }
    // The oracle takes ~1 minute and 3.5 GB: it reruns only for new ids.
    dir_ = new fs::path(fs::path(DUET_BUILD_DIR) / "gemma3_oracle");
    setup_error_ = testing::run_oracle(model, testing::oracle_input(input), *dir_, kGreedyTokens);
  }

  static void TearDownTestSuite() {
    for (Pipeline* p : pipelines_) delete p;
    pipelines_.clear();
    delete host_;
    delete prompts_;
    delete dir_;
  }

  void SetUp() override { ASSERT_TRUE(setup_error_.empty()) << setup_error_; }

  static inline PluginHost* host_ = nullptr;
  static inline std::vector<Pipeline*> pipelines_;
  static inline std::vector<Prompt>* prompts_ = nullptr;
  static inline fs::path* dir_ = nullptr;
  static inline std::string setup_error_;
};

TEST_F(Gemma3Model, LogitsAndGreedyTokensMatchTheOracleOnEveryBackend) {
  for (Pipeline* pipeline : pipelines_) {
    const std::string backend = pipeline->check().backend;
    for (const Prompt& p : *prompts_) {
      NullSink sink;
      const RunResult r = pipeline->run_tokens(p.ids, sink);
      const std::vector<float> oracle = testing::read_logits(*dir_ / (p.name + ".logits.f32"));
      ASSERT_EQ(r.prompt_logits.size(), oracle.size()) << backend << " " << p.name;
      const double nmse = testing::logits_nmse(r.prompt_logits, oracle);
      std::printf("gemma3 %-9s %-7s %2zu positions: logits NMSE %.3g, text '%s'\n", backend.c_str(),
                  p.name.c_str(), p.ids.size(), nmse, r.text.c_str());
      EXPECT_LE(nmse, 1e-6) << backend << " " << p.name;
      EXPECT_EQ(r.generated_tokens, testing::oracle_greedy(*dir_ / "oracle.json", p.name))
          << backend << " " << p.name;
      if (p.name == "capital") {
        EXPECT_EQ(r.text.rfind(" France", 0), 0u) << backend << ": " << r.text;
      }
    }
  }
}

}  // namespace
}  // namespace duet
