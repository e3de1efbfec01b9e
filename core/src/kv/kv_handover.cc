#include "kv/kv_handover.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "duet/error.h"
#include "duet/plugin.h"
#include "duet/quant.h"

namespace duet {
namespace {

// ABI 1.4 appended the range export and import (duet/plugin.h).
constexpr uint32_t kRangeAbi = 4;

}  // namespace

void export_range(KVEndpoint e, const SlotRange& r, std::vector<uint8_t>& out) {
  if (e.abi_minor >= kRangeAbi) {
    e.cache.export_slot_range(r.first, r.count, out);
  } else {
    e.cache.KVCache::export_slot_range(r.first, r.count, out);
  }
}

void import_range(KVEndpoint e, const SlotRange& r, const std::vector<uint8_t>& in) {
  if (e.abi_minor >= kRangeAbi) {
    e.cache.import_slot_range(r.first, r.count, in);
  } else {
    e.cache.KVCache::import_slot_range(r.first, r.count, in);
  }
}

std::vector<uint8_t> convert_kv_rows(const std::vector<uint8_t>& rows, DType from, DType to,
                                     int64_t row_elements) {
  if (from == to) return rows;
  const auto n = static_cast<uint64_t>(row_elements);
  const uint64_t in_row = *dtype_row_bytes(from, n), out_row = *dtype_row_bytes(to, n);
  const uint64_t count = rows.size() / in_row;
  std::vector<uint8_t> out(count * out_row);
  std::vector<float> values(n);
  for (uint64_t r = 0; r < count; ++r) {
    dequantize_row(from, rows.data() + r * in_row, values.data(), row_elements);
    quantize_row(to, values.data(), out.data() + r * out_row, row_elements);
  }
  return out;
}

void add_slot_range(std::vector<SlotRange>& ranges, int64_t first, int64_t count) {
  if (count <= 0) return;
  if (!ranges.empty() && ranges.back().first + ranges.back().count == first) {
    ranges.back().count += count;
  } else {
    ranges.push_back(SlotRange{first, count});
  }
}

HandoverStats hand_over(KVEndpoint from, KVEndpoint to, std::span<const SlotRange> ranges) {
  const KVCacheSpec& a = from.cache.spec();
  const KVCacheSpec& b = to.cache.spec();
  if (a.n_layers != b.n_layers || a.n_kv_heads != b.n_kv_heads || a.head_dim != b.head_dim ||
      a.capacity_tokens != b.capacity_tokens) {
    throw Error(ErrorKind::kInternal, "KV handover between caches of different geometry");
  }
  const auto start = std::chrono::steady_clock::now();
  HandoverStats stats;
  std::vector<uint8_t> rows;
  for (const SlotRange& r : ranges) {
    export_range(from, r, rows);
    stats.bytes += rows.size();
    if (a.dtype == b.dtype) {
      import_range(to, r, rows);
    } else {
      import_range(to, r,
                   convert_kv_rows(rows, a.dtype, b.dtype, int64_t{a.n_kv_heads} * a.head_dim));
    }
  }
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return stats;
}

}  // namespace duet
