// kv_handover.h — a sequence's cache moved from one backend's storage to
// another's, at a stage that runs on another backend than the one before.
//
// Only the slots the sequence holds travel, as ranges of whole blocks (the
// last one up to the sequence's length), through the range export/import
// contract of duet/kv_cache.h ([layer][k|v][slot] rows of the cache's
// dtype, in host memory); the other sequences' slots in the receiver stay
// as they are. Rows are converted on the way when the two caches store
// different dtypes: each is widened to f32 (dequantize_row) and stored as
// the receiver would store it (quantize_row), so the receiver holds exactly
// the bytes it would have written itself for those values. A layout of the
// backend's own (tiles) is the storage's business: export and import move
// rows either way.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "duet/kv_cache.h"

namespace duet {

// `rows` (an export in `from`) as the same values stored in `to`; rows of
// `row_elements` elements each. Returns `rows` unchanged when the dtypes
// match. REQUIRES: both dtypes can hold a row of row_elements.
std::vector<uint8_t> convert_kv_rows(const std::vector<uint8_t>& rows, DType from, DType to,
                                     int64_t row_elements);

// Slots [first, first + count) of every layer.
struct SlotRange {
  int64_t first = 0;
  int64_t count = 0;
};

// Appends slots [first, first + count) to `ranges`, merged into the last
// range when they continue it.
void add_slot_range(std::vector<SlotRange>& ranges, int64_t first, int64_t count);

// A cache and the ABI minor version of the plugin that made it: the range
// export and import are the cache's own from ABI 1.4 on, and KVCache's
// base versions (through export_slots/import_slots) before.
struct KVEndpoint {
  KVCache& cache;
  uint32_t abi_minor;
};

// `r` of every layer out of (into) `e`'s cache: through its own range
// export (import) from ABI 1.4 on, through KVCache's base version before.
void export_range(KVEndpoint e, const SlotRange& r, std::vector<uint8_t>& out);
void import_range(KVEndpoint e, const SlotRange& r, const std::vector<uint8_t>& in);

struct HandoverStats {
  uint64_t bytes = 0;    // bytes exported from the sender (what a transport would carry)
  double seconds = 0.0;  // export, conversion and import
};

// Moves `ranges` of every layer from `from` to `to`. REQUIRES: the two
// specs have the same layers, heads, head_dim and capacity (core's
// bookkeeping places a sequence at the same slots in both); else
// duet::Error(kInternal).
HandoverStats hand_over(KVEndpoint from, KVEndpoint to, std::span<const SlotRange> ranges);

}  // namespace duet
