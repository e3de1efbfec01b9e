// stage_options.h — the options of core's built-in stages, parsed from
// their YAML entries (internal to core).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "duet/app/pipeline_config.h"

namespace duet {

struct PrefillOptions {
  int32_t chunk_tokens = 0;  // 0 = the whole prompt in one pass
  bool all_logits = false;   // keep every position's logits, not only the last
};

struct DecodeOptions {
  int32_t max_new_tokens = 256;
  std::vector<std::string> stop;  // stop strings; end-of-generation tokens always stop
};

// Names of the stages core provides.
bool is_builtin_stage(const std::string& name);

// Each throws duet::Error(kConfig) naming the key path and the accepted
// values for a bad or unknown option.
PrefillOptions parse_prefill_options(const StageConfig& stage);
DecodeOptions parse_decode_options(const StageConfig& stage);

}  // namespace duet
