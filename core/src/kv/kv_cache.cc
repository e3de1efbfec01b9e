#include "duet/kv_cache.h"

#include <algorithm>
#include <string>

#include "duet/error.h"

namespace duet {

Support check_contiguous_kv_cache(const KVCacheSpec& spec, std::string_view backend,
                                  std::initializer_list<DType> dtypes) {
  Support s;
  const std::string who = "backend '" + std::string(backend) + "'";
  if (spec.impl != "contiguous") {
    s.reasons.push_back(who + " stores KV caches as 'contiguous' only, not '" + spec.impl +
                        "'; set components.kv_cache.impl to contiguous");
  }
  s.merge(check_kv_rows(spec, who, dtypes));
  return s;
}

Support check_kv_rows(const KVCacheSpec& spec, std::string_view who,
                      std::initializer_list<DType> dtypes) {
  Support s;
  if (std::find(dtypes.begin(), dtypes.end(), spec.dtype) == dtypes.end()) {
    // "f32", "f32 or f16", "f32, f16 or q8_0".
    std::string names;
    size_t i = 0;
    for (DType t : dtypes) {
      names += (i == 0 ? "" : i + 1 == dtypes.size() ? " or " : ", ") + std::string(dtype_name(t));
      ++i;
    }
    s.reasons.push_back(std::string(who) + " holds K and V as " + names + ", not " +
                        std::string(dtype_name(spec.dtype)) +
                        "; set components.kv_cache.dtype to " + names);
  }
  const int64_t block = dtype_traits(spec.dtype).block_size;
  if (block > 1 && spec.head_dim > 0 && spec.head_dim % block != 0) {
    s.reasons.push_back("a " + std::string(dtype_name(spec.dtype)) + " KV cache stores blocks of " +
                        std::to_string(block) + " elements, which head_dim " +
                        std::to_string(spec.head_dim) +
                        " does not divide; set components.kv_cache.dtype to f16 or f32");
  }
  if (spec.n_layers <= 0 || spec.n_kv_heads <= 0 || spec.head_dim <= 0 ||
      spec.capacity_tokens <= 0 || spec.block_tokens <= 0 ||
      spec.capacity_tokens % spec.block_tokens != 0) {
    s.reasons.push_back("KV-cache geometry is invalid: capacity " +
                        std::to_string(spec.capacity_tokens) + ", block " +
                        std::to_string(spec.block_tokens) +
                        "; the block size must be positive and divide the capacity");
  }
  return s;
}

namespace {

void check_slots(const KVCacheSpec& spec, int64_t first, int64_t n) {
  if (first < 0 || n < 0 || first > spec.capacity_tokens || n > spec.capacity_tokens - first) {
    throw Error(ErrorKind::kInternal,
                "KV-cache slots [" + std::to_string(first) + ", " + std::to_string(first + n) +
                    ") are outside the capacity of " + std::to_string(spec.capacity_tokens));
  }
}

}  // namespace

void check_kv_range_export(const KVCacheSpec& spec, int64_t first_slot, int64_t n_slots) {
  check_slots(spec, first_slot, n_slots);
}

void check_kv_range_import(const KVCacheSpec& spec, int64_t first_slot, int64_t n_slots,
                           size_t bytes) {
  check_slots(spec, first_slot, n_slots);
  const uint64_t row = *dtype_row_bytes(
      spec.dtype, static_cast<uint64_t>(spec.n_kv_heads) * static_cast<uint64_t>(spec.head_dim));
  const uint64_t expected =
      2 * row * static_cast<uint64_t>(n_slots) * static_cast<uint64_t>(spec.n_layers);
  if (bytes != expected) {
    throw Error(ErrorKind::kInternal, "KV-cache import of " + std::to_string(n_slots) +
                                          " slots needs " + std::to_string(expected) +
                                          " bytes, got " + std::to_string(bytes));
  }
}

void check_kv_export(const KVCacheSpec& spec, int64_t n_slots) {
  check_kv_range_export(spec, 0, n_slots);
}

void check_kv_import(const KVCacheSpec& spec, int64_t n_slots, size_t bytes) {
  check_kv_range_import(spec, 0, n_slots, bytes);
}

namespace {

// Bytes of one part ([layer][k|v]) of an export of `n_slots` slots.
uint64_t part_bytes(const KVCacheSpec& spec, int64_t n_slots) {
  return *dtype_row_bytes(spec.dtype, static_cast<uint64_t>(spec.n_kv_heads) *
                                          static_cast<uint64_t>(spec.head_dim)) *
         static_cast<uint64_t>(n_slots);
}

}  // namespace

void KVCache::export_slot_range(int64_t first_slot, int64_t n_slots,
                                std::vector<uint8_t>& host_out) {
  check_kv_range_export(spec(), first_slot, n_slots);
  std::vector<uint8_t> prefix;
  export_slots(first_slot + n_slots, prefix);
  const uint64_t whole = part_bytes(spec(), first_slot + n_slots);
  const uint64_t skip = part_bytes(spec(), first_slot);
  const uint64_t part = whole - skip;
  host_out.resize(2 * part * static_cast<uint64_t>(spec().n_layers));
  for (uint64_t i = 0; i < 2 * static_cast<uint64_t>(spec().n_layers); ++i) {
    std::copy_n(prefix.data() + i * whole + skip, part, host_out.data() + i * part);
  }
}

void KVCache::import_slot_range(int64_t first_slot, int64_t n_slots,
                                const std::vector<uint8_t>& host_in) {
  check_kv_range_import(spec(), first_slot, n_slots, host_in.size());
  std::vector<uint8_t> prefix;
  export_slots(first_slot + n_slots, prefix);
  const uint64_t whole = part_bytes(spec(), first_slot + n_slots);
  const uint64_t skip = part_bytes(spec(), first_slot);
  const uint64_t part = whole - skip;
  for (uint64_t i = 0; i < 2 * static_cast<uint64_t>(spec().n_layers); ++i) {
    std::copy_n(host_in.data() + i * part, part, prefix.data() + i * whole + skip);
  }
  import_slots(first_slot + n_slots, prefix);
}

void check_kv_block_copy(const KVCacheSpec& spec, int64_t src_block, int64_t dst_block, int64_t n) {
  const int64_t b = spec.block_tokens;
  check_slots(spec, src_block * b, n * b);
  check_slots(spec, dst_block * b, n * b);
  if (src_block < dst_block + n && dst_block < src_block + n) {
    throw Error(ErrorKind::kInternal, "KV-cache block copy ranges overlap: " + std::to_string(n) +
                                          " blocks from " + std::to_string(src_block) + " to " +
                                          std::to_string(dst_block));
  }
}

void require_slot_rows(const KVLayerView& view, std::string_view attention) {
  if (view.tile_slots != 0) {
    throw Error(ErrorKind::kPlugin,
                std::string(attention) + " reads KV caches stored as slot rows, not in tiles of " +
                    std::to_string(view.tile_slots) + " slots (another backend's cache layout)");
  }
}

}  // namespace duet
