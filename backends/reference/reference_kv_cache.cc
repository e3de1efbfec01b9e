#include "reference_kv_cache.h"

#include <cstring>

#include "duet/error.h"

namespace duet::reference {

Support ReferenceKVCache::check(const KVCacheSpec& spec) {
  return check_contiguous_kv_cache(spec, "reference", {DType::kF32, DType::kF16, DType::kQ8_0});
}

ReferenceKVCache::ReferenceKVCache(const KVCacheSpec& spec, ReferenceDevice& device)
    : spec_(spec), layer_bytes_(slot_bytes() * static_cast<uint64_t>(spec.capacity_tokens)) {
  storage_ = device.allocate(memory_bytes());
  std::memset(storage_->data(), 0, storage_->size());
}

uint64_t ReferenceKVCache::slot_bytes() const {
  return *dtype_row_bytes(
      spec_.dtype, static_cast<uint64_t>(spec_.n_kv_heads) * static_cast<uint64_t>(spec_.head_dim));
}

KVLayerView ReferenceKVCache::layer(int32_t layer) {
  auto* base = static_cast<uint8_t*>(storage_->data()) + 2 * layer_bytes_ * static_cast<uint64_t>(layer);
  return KVLayerView{base, base + layer_bytes_, slot_bytes()};
}

void ReferenceKVCache::check_slots(int64_t first, int64_t n) const {
  if (first < 0 || n < 0 || first > spec_.capacity_tokens || n > spec_.capacity_tokens - first) {
    throw Error(ErrorKind::kInternal, "KV-cache slots [" + std::to_string(first) + ", " +
                                          std::to_string(first + n) + ") are outside the capacity of " +
                                          std::to_string(spec_.capacity_tokens));
  }
}

void ReferenceKVCache::copy_blocks(int64_t src_block, int64_t dst_block, int64_t n) {
  const int64_t b = spec_.block_tokens;
  check_slots(src_block * b, n * b);
  check_slots(dst_block * b, n * b);
  if (src_block < dst_block + n && dst_block < src_block + n) {
    throw Error(ErrorKind::kInternal, "KV-cache block copy ranges overlap");
  }
  const uint64_t block_bytes = slot_bytes() * static_cast<uint64_t>(spec_.block_tokens);
  for (int32_t l = 0; l < spec_.n_layers; ++l) {
    KVLayerView v = layer(l);
    for (void* base : {v.k, v.v}) {
      auto* p = static_cast<uint8_t*>(base);
      std::memcpy(p + static_cast<uint64_t>(dst_block) * block_bytes,
                  p + static_cast<uint64_t>(src_block) * block_bytes, static_cast<uint64_t>(n) * block_bytes);
    }
  }
}

void ReferenceKVCache::export_slots(int64_t n_slots, std::vector<uint8_t>& host_out) {
  check_slots(0, n_slots);
  const uint64_t part = slot_bytes() * static_cast<uint64_t>(n_slots);
  host_out.resize(2 * part * static_cast<uint64_t>(spec_.n_layers));
  uint8_t* out = host_out.data();
  for (int32_t l = 0; l < spec_.n_layers; ++l) {
    KVLayerView v = layer(l);
    std::memcpy(out, v.k, part);
    std::memcpy(out + part, v.v, part);
    out += 2 * part;
  }
}

void ReferenceKVCache::import_slots(int64_t n_slots, const std::vector<uint8_t>& host_in) {
  check_slots(0, n_slots);
  const uint64_t part = slot_bytes() * static_cast<uint64_t>(n_slots);
  if (host_in.size() != 2 * part * static_cast<uint64_t>(spec_.n_layers)) {
    throw Error(ErrorKind::kInternal, "KV-cache import of " + std::to_string(n_slots) + " slots needs " +
                                               std::to_string(2 * part * static_cast<uint64_t>(spec_.n_layers)) +
                                               " bytes, got " + std::to_string(host_in.size()));
  }
  const uint8_t* in = host_in.data();
  for (int32_t l = 0; l < spec_.n_layers; ++l) {
    KVLayerView v = layer(l);
    std::memcpy(v.k, in, part);
    std::memcpy(v.v, in + part, part);
    in += 2 * part;
  }
}

}  // namespace duet::reference
