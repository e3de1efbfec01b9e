// cuda_kv_cache.h — K and V of every layer in device memory, f32.
#pragma once

#include <memory>
#include <vector>

#include "cuda_device.h"
#include "duet/kv_cache.h"

namespace duet::cuda {

// One allocation laid out [layer][k|v][slot][head][dim], as the reference
// backend's, so export_slots/import_slots move a cache between the two
// unchanged. The storage does not care how core groups slots into blocks,
// so any block_tokens that divides the capacity is accepted. Zeroed when
// created. Copies are queued on the device's stream; export and import wait
// for them.
class CudaKVCache final : public KVCache {
 public:
  // Why `spec` cannot be stored here; empty when it can.
  static Support check(const KVCacheSpec& spec);

  // REQUIRES: check(spec).ok(). Throws duet::Error(kOutOfMemory) when the
  // device cannot hold it.
  CudaKVCache(const KVCacheSpec& spec, CudaDevice& device);

  const KVCacheSpec& spec() const override { return spec_; }
  uint64_t memory_bytes() const override {
    return 2 * layer_bytes_ * static_cast<uint64_t>(spec_.n_layers);
  }
  KVLayerView layer(int32_t layer) override;
  void copy_blocks(int64_t src_block, int64_t dst_block, int64_t n) override;
  void export_slots(int64_t n_slots, std::vector<uint8_t>& host_out) override;
  void import_slots(int64_t n_slots, const std::vector<uint8_t>& host_in) override;

 private:
  uint64_t slot_bytes() const;

  KVCacheSpec spec_;
  CudaDevice& device_;
  uint64_t layer_bytes_;  // bytes of K (or V) of one layer
  std::unique_ptr<Buffer> storage_;
};

}  // namespace duet::cuda
