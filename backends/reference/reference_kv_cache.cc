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
  auto* base =
      static_cast<uint8_t*>(storage_->data()) + 2 * layer_bytes_ * static_cast<uint64_t>(layer);
  return KVLayerView{base, base + layer_bytes_, slot_bytes()};
}

void ReferenceKVCache::copy_blocks(int64_t src_block, int64_t dst_block, int64_t n) {
  check_kv_block_copy(spec_, src_block, dst_block, n);
  const uint64_t block_bytes = slot_bytes() * static_cast<uint64_t>(spec_.block_tokens);
  for (int32_t l = 0; l < spec_.n_layers; ++l) {
    KVLayerView v = layer(l);
    for (void* base : {v.k, v.v}) {
      auto* p = static_cast<uint8_t*>(base);
      std::memcpy(p + static_cast<uint64_t>(dst_block) * block_bytes,
                  p + static_cast<uint64_t>(src_block) * block_bytes,
                  static_cast<uint64_t>(n) * block_bytes);
    }
  }
}

void ReferenceKVCache::export_slots(int64_t n_slots, std::vector<uint8_t>& host_out) {
  check_kv_export(spec_, n_slots);
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
  check_kv_import(spec_, n_slots, host_in.size());
  const uint64_t part = slot_bytes() * static_cast<uint64_t>(n_slots);
  const uint8_t* in = host_in.data();
  for (int32_t l = 0; l < spec_.n_layers; ++l) {
    KVLayerView v = layer(l);
    std::memcpy(v.k, in, part);
    std::memcpy(v.v, in + part, part);
    in += 2 * part;
  }
}

}  // namespace duet::reference
