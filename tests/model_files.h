// model_files.h — where tests find the real model.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

namespace duet::testing {

// SmolLM2-135M-Instruct Q4_1: $DUET_MODEL if set, else models/ in the
// source tree (scripts/fetch-model.sh puts it there).
inline std::filesystem::path model_path() {
  if (const char* env = std::getenv("DUET_MODEL"); env != nullptr && *env != '\0') return env;
  return std::filesystem::path(DUET_SOURCE_DIR) / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf";
}

// Gemma 3 270M Q4_K_M (q4_k, q6_k, q5_0 and q8_0 tensors): models/ in the
// source tree (scripts/fetch-model.sh puts it there).
inline std::filesystem::path gemma_path() {
  return std::filesystem::path(DUET_SOURCE_DIR) / "models" / "gemma-3-270m-q4_k_m.gguf";
}

// What a test says when the model is absent: it fails, never skips.
inline std::string missing_model_message(const std::filesystem::path& path) {
  return "model file " + path.string() +
         " is missing; run `bash scripts/fetch-model.sh` (or set DUET_MODEL)";
}

}  // namespace duet::testing
