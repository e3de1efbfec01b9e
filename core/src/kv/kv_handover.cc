#include "kv/kv_handover.h"

#include <chrono>
#include <string>

#include "duet/error.h"
#include "duet/quant.h"

namespace duet {

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

HandoverStats hand_over(KVCache& from, KVCache& to, int64_t n_slots) {
  const KVCacheSpec& a = from.spec();
  const KVCacheSpec& b = to.spec();
  if (a.n_layers != b.n_layers || a.n_kv_heads != b.n_kv_heads || a.head_dim != b.head_dim ||
      a.capacity_tokens != b.capacity_tokens) {
    throw Error(ErrorKind::kInternal, "KV handover between caches of different geometry");
  }
  const auto start = std::chrono::steady_clock::now();
  std::vector<uint8_t> rows;
  from.export_slots(n_slots, rows);
  HandoverStats stats;
  stats.bytes = rows.size();
  if (a.dtype == b.dtype) {
    to.import_slots(n_slots, rows);
  } else {
    to.import_slots(n_slots,
                    convert_kv_rows(rows, a.dtype, b.dtype, int64_t{a.n_kv_heads} * a.head_dim));
  }
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return stats;
}

}  // namespace duet
