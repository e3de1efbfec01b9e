// The reference backend against the independent NumPy oracle
// (tests/oracle/llama_oracle.py, which reads the GGUF with the `gguf`
// package and its own dequantization): logits at every prompt position of
// three prompts, and the perplexity of a committed paragraph.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "duet/app/perplexity.h"
#include "duet/app/pipeline.h"
#include "oracle_outputs.h"

namespace duet {
namespace {

namespace fs = std::filesystem;

struct Prompt {
  std::string name;
  std::vector<int32_t> ids;
};

using testing::read_logits;
using testing::slurp;

class SmolLM2Oracle : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const fs::path src = DUET_SOURCE_DIR;
    const fs::path model = src / "models/SmolLM2-135M-Instruct.Q4_1.gguf";
    if (!fs::exists(model)) {
      setup_error_ = model.string() + " is missing; run `bash scripts/fetch-model.sh`";
      return;
    }
    host_ = new PluginHost;
    PipelineConfig config = load_pipeline_config(
        src / "configs/smollm2-reference.yaml",
        {"stages.0.prefill.all_logits=true", "stages.1.decode.max_new_tokens=1"});
    load_pipeline_plugins(config, *host_);
    pipeline_ = Pipeline::build(config, *host_).release();

    std::string paragraph = slurp(src / "tests/data/perplexity_paragraph.txt");
    while (!paragraph.empty() && paragraph.back() == '\n') paragraph.pop_back();
    prompts_ = new std::vector<Prompt>{
        {"capital", pipeline_->tokenize_prompt("What is the capital of France?")},  // chat template
        {"count", pipeline_->tokenizer().encode("Count from one to ten: one, two, three,", false)},
        {"story",
         pipeline_->tokenizer().encode("Once upon a time, in a small village by the sea,", false)},
        {"paragraph", pipeline_->tokenizer().encode(paragraph, false)},
    };

    // Run the oracle unless its outputs for exactly these ids are present.
    dir_ = new fs::path(fs::path(DUET_BUILD_DIR) / "oracle");
    fs::create_directories(*dir_);
    std::string input = "{\"prompts\": [";
    for (size_t i = 0; i < prompts_->size(); ++i) {
      input +=
          std::string(i ? ", " : "") + "{\"name\": \"" + (*prompts_)[i].name + "\", \"ids\": [";
      for (size_t j = 0; j < (*prompts_)[i].ids.size(); ++j) {
        input += (j ? ", " : "") + std::to_string((*prompts_)[i].ids[j]);
      }
      input += "]}";
    }
    input += "]}\n";
    const fs::path input_path = *dir_ / "input.json";
    if (!fs::exists(*dir_ / "oracle.json") || slurp(input_path) != input) {
      fs::remove(*dir_ / "oracle.json");
      std::ofstream(input_path) << input;
      const std::string cmd = "py=$(bash '" + (src / "scripts/python-env.sh").string() +
                              "') && \"$py\" '" + (src / "tests/oracle/llama_oracle.py").string() +
                              "' --model '" + model.string() + "' --input '" + input_path.string() +
                              "' --output-dir '" + dir_->string() + "'";
      if (std::system(cmd.c_str()) != 0 || !fs::exists(*dir_ / "oracle.json")) {
        setup_error_ = "the oracle failed: " + cmd;
      }
    }
  }

  static void TearDownTestSuite() {
    delete pipeline_;
    delete host_;
    delete prompts_;
    delete dir_;
  }

  void SetUp() override { ASSERT_TRUE(setup_error_.empty()) << setup_error_; }

  // Duet's logits at every position of `ids`.
  static std::vector<float> duet_logits(const std::vector<int32_t>& ids) {
    NullSink sink;
    return pipeline_->run_tokens(ids, sink).prompt_logits;
  }

  // The oracle's perplexity for `name`, read from oracle.json (one prompt
  // object per line, compact).
  static double oracle_perplexity(const std::string& name) {
    std::istringstream json(slurp(*dir_ / "oracle.json"));
    for (std::string line; std::getline(json, line);) {
      if (line.find("\"name\":\"" + name + "\"") == std::string::npos) continue;
      const size_t key = line.find("\"perplexity\":");
      if (key != std::string::npos) return std::stod(line.substr(key + 13));
    }
    ADD_FAILURE() << "no perplexity for '" << name << "' in oracle.json";
    return 0.0;
  }

  static inline PluginHost* host_ = nullptr;
  static inline Pipeline* pipeline_ = nullptr;
  static inline std::vector<Prompt>* prompts_ = nullptr;
  static inline fs::path* dir_ = nullptr;
  static inline std::string setup_error_;
};

// Tolerance: max |duet - oracle| over every logit of every position must be
// at most 1e-3 of that prompt's logit range (max - min over all its logits).
// The reference backend keeps activations in f32 with double accumulation;
// the oracle computes in float64 from the same dequantized weights.
TEST_F(SmolLM2Oracle, LogitsAgreeAtEveryPromptPosition) {
  const int32_t vocab = pipeline_->check().hparams.n_vocab;
  for (const char* name : {"capital", "count", "story"}) {
    const auto& ids = std::find_if(prompts_->begin(), prompts_->end(), [&](const Prompt& p) {
                        return p.name == name;
                      })->ids;
    const std::vector<float> ours = duet_logits(ids);
    const std::vector<float> oracle = read_logits(*dir_ / (std::string(name) + ".logits.f32"));
    ASSERT_EQ(ours.size(), ids.size() * static_cast<size_t>(vocab)) << name;
    ASSERT_EQ(oracle.size(), ours.size()) << name;
    float lo = oracle[0], hi = oracle[0], worst = 0;
    size_t argmax_agree = 0;
    for (size_t row = 0; row < ids.size(); ++row) {
      size_t a = 0, b = 0;
      for (size_t v = 0; v < static_cast<size_t>(vocab); ++v) {
        const size_t i = row * static_cast<size_t>(vocab) + v;
        lo = std::min(lo, oracle[i]);
        hi = std::max(hi, oracle[i]);
        worst = std::max(worst, std::abs(ours[i] - oracle[i]));
        if (ours[i] > ours[row * static_cast<size_t>(vocab) + a]) a = v;
        if (oracle[i] > oracle[row * static_cast<size_t>(vocab) + b]) b = v;
      }
      argmax_agree += a == b ? 1 : 0;
    }
    const float range = hi - lo;
    std::printf(
        "oracle %-8s %3zu positions: max |diff| %.3g, logit range %.3g, ratio %.3g, argmax agree "
        "%zu/%zu\n",
        name, ids.size(), double{worst}, double{range}, double{worst / range}, argmax_agree,
        ids.size());
    EXPECT_LE(worst, 1e-3f * range) << name;
    EXPECT_EQ(argmax_agree, ids.size()) << name;
  }
}

TEST_F(SmolLM2Oracle, ParagraphPerplexityIsWithinOnePercentOfTheOracle) {
  const auto& ids = prompts_->back().ids;
  const double ours = perplexity(duet_logits(ids), ids, pipeline_->check().hparams.n_vocab);
  const double oracle = oracle_perplexity("paragraph");
  std::printf("paragraph perplexity over %zu tokens: duet %.5f, oracle %.5f\n", ids.size(), ours,
              oracle);
  EXPECT_NEAR(ours, oracle, 0.01 * oracle);
}

}  // namespace
}  // namespace duet
