// kernels/with_heads.h — a run-time count of query heads as a template
// argument, for the attention kernels whose per-head accumulators live in
// registers (an array sized by a constant).
#pragma once

#include <cstdint>

namespace duet::onednn::detail {

// Calls body.template operator()<H>() with H = heads, 1 to kMax (3 or 4);
// a larger count runs as kMax. Callers step through their heads kMax at a
// time.
template <int kMax, class Body>
__attribute__((always_inline)) inline void with_heads(int64_t heads, const Body& body) {
  static_assert(kMax == 3 || kMax == 4);
  switch (heads) {
    case 1:
      return body.template operator()<1>();
    case 2:
      return body.template operator()<2>();
    case 3:
      return body.template operator()<3>();
    default:
      return body.template operator()<kMax>();
  }
}

}  // namespace duet::onednn::detail
