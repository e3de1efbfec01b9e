#include "cuda_kv_cache.h"

#include <string>

#include "cuda_error.h"
#include "duet/error.h"

namespace duet::cuda {

Support CudaKVCache::check(const KVCacheSpec& spec) {
  return check_contiguous_kv_cache(spec, "cuda", {DType::kF32});
}

CudaKVCache::CudaKVCache(const KVCacheSpec& spec, CudaDevice& device)
    : spec_(spec),
      device_(device),
      layer_bytes_(static_cast<uint64_t>(spec.capacity_tokens) * slot_bytes()) {
  storage_ = device.allocate(memory_bytes());
  check_cuda(cudaMemsetAsync(storage_->data(), 0, storage_->size(), device.stream()),
             "clearing the KV cache");
}

uint64_t CudaKVCache::slot_bytes() const {
  return static_cast<uint64_t>(spec_.n_kv_heads) * static_cast<uint64_t>(spec_.head_dim) *
         sizeof(float);
}

KVLayerView CudaKVCache::layer(int32_t layer) {
  auto* base =
      static_cast<uint8_t*>(storage_->data()) + 2 * layer_bytes_ * static_cast<uint64_t>(layer);
  return KVLayerView{base, base + layer_bytes_, slot_bytes()};
}

void CudaKVCache::copy_blocks(int64_t src_block, int64_t dst_block, int64_t n) {
  check_kv_block_copy(spec_, src_block, dst_block, n);
  const uint64_t block_bytes = slot_bytes() * static_cast<uint64_t>(spec_.block_tokens);
  for (int32_t l = 0; l < spec_.n_layers; ++l) {
    KVLayerView v = layer(l);
    for (void* base : {v.k, v.v}) {
      auto* p = static_cast<uint8_t*>(base);
      device_.copy_on_device(p + static_cast<uint64_t>(dst_block) * block_bytes,
                             p + static_cast<uint64_t>(src_block) * block_bytes,
                             static_cast<uint64_t>(n) * block_bytes);
    }
  }
}

void CudaKVCache::export_slots(int64_t n_slots, std::vector<uint8_t>& host_out) {
  check_kv_export(spec_, n_slots);
  const uint64_t part = slot_bytes() * static_cast<uint64_t>(n_slots);
  host_out.resize(2 * part * static_cast<uint64_t>(spec_.n_layers));
  uint8_t* out = host_out.data();
  for (int32_t l = 0; l < spec_.n_layers; ++l) {
    KVLayerView v = layer(l);
    device_.copy_to_host(out, v.k, part);
    device_.copy_to_host(out + part, v.v, part);
    out += 2 * part;
  }
  device_.synchronize();
}

void CudaKVCache::import_slots(int64_t n_slots, const std::vector<uint8_t>& host_in) {
  check_kv_import(spec_, n_slots, host_in.size());
  const uint64_t part = slot_bytes() * static_cast<uint64_t>(n_slots);
  const uint8_t* in = host_in.data();
  for (int32_t l = 0; l < spec_.n_layers; ++l) {
    KVLayerView v = layer(l);
    device_.copy_from_host(v.k, in, part);
    device_.copy_from_host(v.v, in + part, part);
    in += 2 * part;
  }
  // host_in may be freed when this returns; pageable copies are staged, but
  // waiting makes the cache's contents certain to callers too.
  device_.synchronize();
}

}  // namespace duet::cuda
