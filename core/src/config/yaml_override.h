// yaml_override.h — applying `--set key.path=value` to a parsed document
// (internal to core; the syntax is documented in duet/app/pipeline_config.h).
#pragma once

#include <string>
#include <vector>

#include "config/yaml_tree.h"

namespace duet::yaml {

// Applies overrides[i] for every i, in order, to `root`; the new nodes get
// override i as their origin. Each malformed override (no '=', an empty key,
// a value that is not YAML, an index out of range, a path through a scalar)
// adds a problem and changes nothing.
void apply_overrides(Node& root, const std::vector<std::string>& overrides, Problems& problems);

}  // namespace duet::yaml
