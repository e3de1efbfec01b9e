// Every registered architecture against the independent NumPy oracle
// (tests/oracle/llama_oracle.py): a small random-weight file of each, written
// by tests/tiny_model.h, run on the reference and onednn backends. Logits at
// every prompt position within NMSE 1e-6 of the oracle's float64 ones, and
// 32 greedy tokens equal to the oracle's greedy continuation.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "duet/app/pipeline.h"
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

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The oracle's greedy ids for `name` from oracle.json (one prompt object per
// line, compact: ..."greedy":[1,2,3]...).
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

std::vector<float> read_logits(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::vector<float> v(fs::file_size(p) / sizeof(float));
  in.read(reinterpret_cast<char*>(v.data()),
          static_cast<std::streamsize>(v.size() * sizeof(float)));
  return v;
}

class ArchitectureOracle : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    const std::string arch = GetParam();
    dir_ = fs::path(DUET_BUILD_DIR) / "architecture_oracle" / arch;
    fs::create_directories(dir_);
    testing::TinyLlama shape;
    shape.architecture = arch;
    shape.matrix_type = DType::kF32;
    // Qwen3's and Gemma 3's heads are wider than n_embd / n_heads.
    if (arch == "qwen3" || arch == "gemma3") shape.head_dim = 32;
    // Gemma 3's sixth layer is its first global one.
    if (arch == "gemma3") shape.n_layers = 6;
    testing::write_tiny_llama(dir_ / "model.gguf", shape);

    std::string input = "{\"prompts\": [";
    for (const Prompt& p : prompts()) {
      input += std::string(input.back() == '[' ? "" : ", ") + "{\"name\": \"" + p.name +
               "\", \"ids\": [";
      for (size_t j = 0; j < p.ids.size(); ++j) input += (j ? ", " : "") + std::to_string(p.ids[j]);
      input += "]}";
    }
    input += "]}\n";
    std::ofstream(dir_ / "input.json") << input;
    fs::remove(dir_ / "oracle.json");
    const fs::path src = DUET_SOURCE_DIR;
    const std::string cmd = "py=$(bash '" + (src / "scripts/python-env.sh").string() +
                            "') && \"$py\" '" + (src / "tests/oracle/llama_oracle.py").string() +
                            "' --model '" + (dir_ / "model.gguf").string() + "' --input '" +
                            (dir_ / "input.json").string() + "' --output-dir '" + dir_.string() +
                            "' --greedy " + std::to_string(kGreedyTokens) + " > /dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
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
      const std::vector<float> oracle = read_logits(dir_ / (p.name + ".logits.f32"));
      ASSERT_EQ(r.prompt_logits.size(), oracle.size()) << backend << " " << p.name;
      double err = 0, norm = 0;
      for (size_t i = 0; i < oracle.size(); ++i) {
        const double d = double{r.prompt_logits[i]} - double{oracle[i]};
        err += d * d;
        norm += double{oracle[i]} * double{oracle[i]};
      }
      const double nmse = err / norm;
      std::printf("%s %-9s %-6s %2zu positions: logits NMSE %.3g\n", GetParam(), backend,
                  p.name.c_str(), p.ids.size(), nmse);
      EXPECT_LE(nmse, 1e-6) << backend << " " << p.name;
      // Generation ends early only at the end-of-generation token, which the
      // oracle (which never stops) must have picked there too.
      const std::vector<int32_t> expected = oracle_greedy(dir_ / "oracle.json", p.name);
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
                         ::testing::Values("llama", "qwen2", "qwen3", "gemma3"), arch_name);

}  // namespace
}  // namespace duet
