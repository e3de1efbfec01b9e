// Gemma 3 270M Q4_K_M (the real file, run with no YAML: the default
// pipeline duet run MODEL.gguf builds) against the independent NumPy oracle
// (tests/oracle/llama_oracle.py, the weights dequantized by gguf-py): logits
// at every prompt position within NMSE 1e-6 and 16 greedy tokens equal, on
// the reference and onednn backends; and the answer is the sensible one.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "duet/app/pipeline.h"
#include "model_files.h"

namespace duet {
namespace {

namespace fs = std::filesystem;

constexpr int kGreedyTokens = 16;

struct Prompt {
  std::string name;
  std::string text;
  std::vector<int32_t> ids;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<float> read_logits(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::vector<float> v(fs::file_size(p) / sizeof(float));
  in.read(reinterpret_cast<char*>(v.data()),
          static_cast<std::streamsize>(v.size() * sizeof(float)));
  return v;
}

// The oracle's greedy ids for `name` (oracle.json: one compact prompt object
// per line).
std::vector<int32_t> oracle_greedy(const fs::path& json, const std::string& name) {
  std::istringstream in(slurp(json));
  for (std::string line; std::getline(in, line);) {
    if (line.find("\"name\":\"" + name + "\"") == std::string::npos) continue;
    const size_t key = line.find("\"greedy\":[");
    if (key == std::string::npos) break;
    std::vector<int32_t> ids;
    std::istringstream list(line.substr(key + 10, line.find(']', key) - key - 10));
    for (std::string id; std::getline(list, id, ',');) ids.push_back(std::stoi(id));
    return ids;
  }
  ADD_FAILURE() << "no greedy ids for '" << name << "' in " << json;
  return {};
}

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
    std::string input = "{\"prompts\": [";
    for (Prompt& p : *prompts_) {
      p.ids = pipelines_[0]->tokenize_prompt(p.text);
      input += std::string(input.back() == '[' ? "" : ", ") + "{\"name\": \"" + p.name +
               "\", \"ids\": [";
      for (size_t j = 0; j < p.ids.size(); ++j) input += (j ? ", " : "") + std::to_string(p.ids[j]);
      input += "]}";
    }
    input += "]}\n";
    // The oracle takes ~1 minute and 3.5 GB: rerun it only for new ids.
    dir_ = new fs::path(fs::path(DUET_BUILD_DIR) / "gemma3_oracle");
    fs::create_directories(*dir_);
    if (!fs::exists(*dir_ / "oracle.json") || slurp(*dir_ / "input.json") != input) {
      fs::remove(*dir_ / "oracle.json");
      std::ofstream(*dir_ / "input.json") << input;
      const fs::path src = DUET_SOURCE_DIR;
      const std::string cmd = "py=$(bash '" + (src / "scripts/python-env.sh").string() +
                              "') && \"$py\" '" + (src / "tests/oracle/llama_oracle.py").string() +
                              "' --model '" + model.string() + "' --input '" +
                              (*dir_ / "input.json").string() + "' --output-dir '" + dir_->string() +
                              "' --greedy " + std::to_string(kGreedyTokens) + " > /dev/null";
      if (std::system(cmd.c_str()) != 0 || !fs::exists(*dir_ / "oracle.json")) {
        setup_error_ = "the oracle failed: " + cmd;
      }
    }
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
      const std::vector<float> oracle = read_logits(*dir_ / (p.name + ".logits.f32"));
      ASSERT_EQ(r.prompt_logits.size(), oracle.size()) << backend << " " << p.name;
      double err = 0, norm = 0;
      for (size_t i = 0; i < oracle.size(); ++i) {
        const double d = double{r.prompt_logits[i]} - double{oracle[i]};
        err += d * d;
        norm += double{oracle[i]} * double{oracle[i]};
      }
      std::printf("gemma3 %-9s %-7s %2zu positions: logits NMSE %.3g, text '%s'\n",
                  backend.c_str(), p.name.c_str(), p.ids.size(), err / norm, r.text.c_str());
      EXPECT_LE(err / norm, 1e-6) << backend << " " << p.name;
      EXPECT_EQ(r.generated_tokens, oracle_greedy(*dir_ / "oracle.json", p.name))
          << backend << " " << p.name;
      if (p.name == "capital") {
        EXPECT_EQ(r.text.rfind(" France", 0), 0u) << backend << ": " << r.text;
      }
    }
  }
}

}  // namespace
}  // namespace duet
