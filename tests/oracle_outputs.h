// oracle_outputs.h — running the NumPy oracle (tests/oracle/llama_oracle.py)
// from a test and reading what it writes: per-prompt logits files and
// oracle.json.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace duet::testing {

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A prompt's logits as the oracle writes them: [n_tokens, n_vocab] float32.
inline std::vector<float> read_logits(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::vector<float> v(std::filesystem::file_size(p) / sizeof(float));
  in.read(reinterpret_cast<char*>(v.data()),
          static_cast<std::streamsize>(v.size() * sizeof(float)));
  return v;
}

// The oracle's input: {"prompts": [{"name": ..., "ids": [...]}, ...]}.
inline std::string oracle_input(
    const std::vector<std::pair<std::string, std::vector<int32_t>>>& prompts) {
  std::string input = "{\"prompts\": [";
  for (size_t i = 0; i < prompts.size(); ++i) {
    input += std::string(i ? ", " : "") + "{\"name\": \"" + prompts[i].first + "\", \"ids\": [";
    for (size_t j = 0; j < prompts[i].second.size(); ++j)
      input += (j ? ", " : "") + std::to_string(prompts[i].second[j]);
    input += "]}";
  }
  return input + "]}\n";
}

// Runs the oracle on `model` for `input` (with `greedy` continuation tokens
// per prompt when > 0) into `dir`, unless `dir` already holds its outputs
// for exactly this input. Returns "" or what failed.
inline std::string run_oracle(const std::filesystem::path& model, const std::string& input,
                              const std::filesystem::path& dir, int greedy = 0) {
  std::filesystem::create_directories(dir);
  if (std::filesystem::exists(dir / "oracle.json") && slurp(dir / "input.json") == input) return "";
  std::filesystem::remove(dir / "oracle.json");
  std::ofstream(dir / "input.json") << input;
  const std::filesystem::path src = DUET_SOURCE_DIR;
  const std::string cmd = "py=$(bash '" + (src / "scripts/python-env.sh").string() +
                          "') && \"$py\" '" + (src / "tests/oracle/llama_oracle.py").string() +
                          "' --model '" + model.string() + "' --input '" +
                          (dir / "input.json").string() + "' --output-dir '" + dir.string() +
                          "' --greedy " + std::to_string(greedy) + " > /dev/null";
  if (std::system(cmd.c_str()) != 0 || !std::filesystem::exists(dir / "oracle.json")) {
    return "the oracle failed: " + cmd;
  }
  return "";
}

// The oracle's greedy ids for prompt `name` (oracle.json: one compact prompt
// object per line, ..."greedy":[1,2,3]...).
inline std::vector<int32_t> oracle_greedy(const std::filesystem::path& json,
                                          const std::string& name) {
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

// Σ(got − want)² / Σ want², in double.
inline double logits_nmse(const std::vector<float>& got, const std::vector<float>& want) {
  double err = 0, norm = 0;
  for (size_t i = 0; i < want.size() && i < got.size(); ++i) {
    const double d = double{got[i]} - double{want[i]};
    err += d * d;
    norm += double{want[i]} * double{want[i]};
  }
  return err / norm;
}

}  // namespace duet::testing
