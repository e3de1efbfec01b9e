// duet/support.h — "can you do this?" answers that carry their reasons.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "duet/export.h"

namespace duet {

// The answer of a capability check. `ok` is true when no reason was given;
// each reason is one sentence a user can act on ("kv_cache dtype q8_0 is not
// supported by attention 'naive'; use f32 or f16").
struct DUET_API Support {
  std::vector<std::string> reasons;

  bool ok() const { return reasons.empty(); }
  static Support yes() { return {}; }
  static Support no(std::string reason) { return Support{{std::move(reason)}}; }
  // Adds `other`'s reasons to this one's.
  void merge(const Support& other) {
    reasons.insert(reasons.end(), other.reasons.begin(), other.reasons.end());
  }
};

}  // namespace duet
