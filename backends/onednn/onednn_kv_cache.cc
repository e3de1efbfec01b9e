#include "onednn_kv_cache.h"

#include <cstring>
#include <string>

#include "duet/error.h"

namespace duet::onednn {

Support OnednnKVCache::check(const KVCacheSpec& spec) {
  return check_contiguous_kv_cache(spec, "onednn", {DType::kF32, DType::kF16, DType::kQ8_0});
}

OnednnKVCache::OnednnKVCache(const KVCacheSpec& spec, OnednnDevice& device)
    : spec_(spec), layer_bytes_(slot_bytes() * static_cast<uint64_t>(spec.capacity_tokens)) {
  storage_ = device.allocate(memory_bytes());
}

uint64_t OnednnKVCache::slot_bytes() const {
  return *dtype_row_bytes(
      spec_.dtype, static_cast<uint64_t>(spec_.n_kv_heads) * static_cast<uint64_t>(spec_.head_dim));
}

KVLayerView OnednnKVCache::layer(int32_t layer) {
  auto* base =
      static_cast<uint8_t*>(storage_->data()) + 2 * layer_bytes_ * static_cast<uint64_t>(layer);
  return KVLayerView{base, base + layer_bytes_, slot_bytes()};
}

void OnednnKVCache::copy_blocks(int64_t src_block, int64_t dst_block, int64_t n) {
  const uint64_t block_bytes = slot_bytes() * static_cast<uint64_t>(spec_.block_tokens);
  for (int32_t l = 0; l < spec_.n_layers; ++l) {
    KVLayerView view = layer(l);
    for (void* base : {view.k, view.v}) {
      auto* p = static_cast<uint8_t*>(base);
      std::memcpy(p + static_cast<uint64_t>(dst_block) * block_bytes,
                  p + static_cast<uint64_t>(src_block) * block_bytes,
                  static_cast<uint64_t>(n) * block_bytes);
    }
  }
}

void OnednnKVCache::export_slots(int64_t n_slots, std::vector<uint8_t>& host_out) {
  const uint64_t part = slot_bytes() * static_cast<uint64_t>(n_slots);
  host_out.resize(2 * part * static_cast<uint64_t>(spec_.n_layers));
  uint8_t* out = host_out.data();
  for (int32_t l = 0; l < spec_.n_layers; ++l) {
    KVLayerView view = layer(l);
    std::memcpy(out, view.k, part);
    std::memcpy(out + part, view.v, part);
    out += 2 * part;
  }
}

void OnednnKVCache::import_slots(int64_t n_slots, const std::vector<uint8_t>& host_in) {
  const uint64_t part = slot_bytes() * static_cast<uint64_t>(n_slots);
  const uint64_t expected = 2 * part * static_cast<uint64_t>(spec_.n_layers);
  if (host_in.size() != expected) {
    throw Error(ErrorKind::kInputRejected, "KV-cache import of " + std::to_string(n_slots) +
                                               " slots needs " + std::to_string(expected) +
                                               " bytes, got " + std::to_string(host_in.size()));
  }
  const uint8_t* in = host_in.data();
  for (int32_t l = 0; l < spec_.n_layers; ++l) {
    KVLayerView view = layer(l);
    std::memcpy(view.k, in, part);
    std::memcpy(view.v, in + part, part);
    in += 2 * part;
  }
}

}  // namespace duet::onednn
