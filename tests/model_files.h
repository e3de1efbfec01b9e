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

// What a test says when the model is absent: it fails, never skips.
inline std::string missing_model_message(const std::filesystem::path& path) {
  return "model file " + path.string() +
         " is missing; run `bash scripts/fetch-model.sh` (or set DUET_MODEL)";
}

}  // namespace duet::testing
