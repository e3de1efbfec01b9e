// kv_handover.h — a sequence's cache moved from one backend's storage to
// another's, at a stage that runs on another backend than the one before.
//
// The rows travel through the export/import contract of duet/kv_cache.h
// ([layer][k|v][slot] rows of the cache's dtype, in host memory) and are
// converted on the way when the two caches store different dtypes: each row
// is widened to f32 (dequantize_row) and stored as the receiver would store
// it (quantize_row), so the receiver holds exactly the bytes it would have
// written itself for those values. A layout of the backend's own (tiles) is
// the storage's business: export and import move rows either way.
#pragma once

#include <cstdint>
#include <vector>

#include "duet/kv_cache.h"

namespace duet {

// `rows` (an export in `from`) as the same values stored in `to`; rows of
// `row_elements` elements each. Returns `rows` unchanged when the dtypes
// match. REQUIRES: both dtypes can hold a row of row_elements.
std::vector<uint8_t> convert_kv_rows(const std::vector<uint8_t>& rows, DType from, DType to,
                                     int64_t row_elements);

struct HandoverStats {
  uint64_t bytes = 0;    // bytes exported from the sender (what a transport would carry)
  double seconds = 0.0;  // export, conversion and import
};

// Moves slots [0, n_slots) of every layer from `from` to `to`. REQUIRES: the
// two specs have the same layers, heads, head_dim and capacity (core's
// bookkeeping places a sequence at the same slots in both).
HandoverStats hand_over(KVCache& from, KVCache& to, int64_t n_slots);

}  // namespace duet
