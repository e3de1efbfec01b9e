// stage_options.h — the options of core's built-in stages, parsed from
// their YAML entries (internal to core).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "duet/app/pipeline_config.h"
#include "duet/stage.h"

namespace duet {

struct PrefillOptions {
  int32_t chunk_tokens = 0;  // 0 = the whole prompt in one pass
  bool all_logits = false;   // keep every position's logits, not only the last
};

// Names of the stages core provides.
bool is_builtin_stage(const std::string& name);

// Each throws duet::Error(kConfig) naming the key path and the accepted
// values for a bad or unknown option.
PrefillOptions parse_prefill_options(const StageConfig& stage);
DecodeLimits parse_decode_options(const StageConfig& stage);

}  // namespace duet
