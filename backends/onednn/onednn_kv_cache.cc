#include "onednn_kv_cache.h"

#include <cstring>
#include <string>

#include "duet/error.h"

namespace duet::onednn {

Support OnednnKVCache::check(const KVCacheSpec& spec) {
  Support s;
  if (spec.impl != "contiguous") {
    s.reasons.push_back("backend 'onednn' stores KV caches as 'contiguous' only, not '" +
                        spec.impl + "'; set components.kv_cache.impl to contiguous");
  }
  if (spec.dtype != DType::kF32 && spec.dtype != DType::kF16) {
    s.reasons.push_back("backend 'onednn' stores K and V as f32 or f16, not " +
                        std::string(dtype_name(spec.dtype)) +
                        "; set components.kv_cache.dtype to f32 or f16");
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

OnednnKVCache::OnednnKVCache(const KVCacheSpec& spec, OnednnDevice& device)
    : spec_(spec), layer_bytes_(slot_bytes() * static_cast<uint64_t>(spec.capacity_tokens)) {
  storage_ = device.allocate(memory_bytes());
}

uint64_t OnednnKVCache::slot_bytes() const {
  return static_cast<uint64_t>(spec_.n_kv_heads) * static_cast<uint64_t>(spec_.head_dim) *
         (spec_.dtype == DType::kF16 ? sizeof(uint16_t) : sizeof(float));
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
