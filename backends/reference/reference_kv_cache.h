// reference_kv_cache.h — K and V of every layer in host memory: f32, f16 or
// q8_0.
#pragma once

#include <memory>
#include <vector>

#include "duet/kv_cache.h"
#include "reference_device.h"

namespace duet::reference {

// Each layer holds capacity_tokens slots of K and of V, each slot n_kv_heads
// x head_dim elements stored as one row of spec.dtype (duet/quant.h's
// layouts: q8_0 blocks of 32 never span two heads). The storage does not
// care how core groups slots into blocks, so any block_tokens that divides
// the capacity is accepted.
class ReferenceKVCache final : public KVCache {
 public:
  // Why `spec` cannot be stored here; empty when it can.
  static Support check(const KVCacheSpec& spec);

  // REQUIRES: check(spec).ok(). Throws duet::Error(kOutOfMemory) when the
  // device cannot hold it.
  ReferenceKVCache(const KVCacheSpec& spec, ReferenceDevice& device);

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
  uint64_t layer_bytes_;             // bytes of K (or V) of one layer
  std::unique_ptr<Buffer> storage_;  // [layer][k|v][slot][head][dim]
};

}  // namespace duet::reference
