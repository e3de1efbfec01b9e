// Fuzz target: the pipeline YAML loader. Input: `--set` overrides, one per
// line, each line starting with "--set ", then the YAML text. A document
// that loads must also survive describe() and load again to the same text.
#include <cstdlib>
#include <string>
#include <vector>

#include "duet/app/pipeline_config.h"
#include "duet/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> overrides;
  while (text.rfind("--set ", 0) == 0) {
    const size_t end = text.find('\n');
    overrides.push_back(text.substr(6, end == std::string::npos ? std::string::npos : end - 6));
    text.erase(0, end == std::string::npos ? text.size() : end + 1);
  }
  duet::PipelineConfig config;
  try {
    config = duet::parse_pipeline_config(text, "fuzz.yaml", "/fuzz", overrides);
  } catch (const duet::Error&) {
    return 0;
  }
  // The normalized form is documented to parse back to the same configuration.
  const std::string normalized = duet::describe(config);
  try {
    const std::string again =
        duet::describe(duet::parse_pipeline_config(normalized, "fuzz.yaml", "/fuzz"));
    if (again != normalized) std::abort();
  } catch (const duet::Error&) {
    std::abort();
  }
  return 0;
}
