// onednn_kv_cache.h — K and V of every layer in host memory: f32, f16 or
// q8_0.
#pragma once

#include <memory>
#include <vector>

#include "duet/kv_cache.h"
#include "kernels/cpu_features.h"
#include "kernels/kv_tiles.h"
#include "onednn_device.h"

namespace duet::onednn {

// Each layer holds capacity_tokens slots of K and of V, each slot n_kv_heads
// x head_dim elements of the spec's dtype: [layer][k|v][slot][head][dim],
// a slot one row of that dtype (duet/quant.h's layouts; q8_0 blocks of 32
// never span two heads). f16 halves the memory and, more to the point, what
// decode attention reads per token — at 2,048 cached positions SmolLM2's
// f32 cache is 94 MB, as much as its weights — and q8_0 (34 bytes per 32
// elements) nearly halves it again. Any block_tokens that divides the capacity is
// accepted (core decides which slots a sequence uses). The storage starts
// zeroed and its pages become resident only as positions are written.
//
// On the VNNI path a q8_0 cache is kept in tiles of 16 slots instead
// (kernels/kv_tiles.h; layer() reports tile_slots = 16), the layout its
// attention multiplies without shuffling bytes; the capacity is rounded up
// to whole tiles. copy_blocks, export_slots and import_slots move rows
// either way, so the two layouts exchange caches.
class OnednnKVCache final : public KVCache {
 public:
  // Why `spec` cannot be stored here; empty when it can.
  static Support check(const KVCacheSpec& spec);

  // REQUIRES: check(spec).ok(). Throws duet::Error(kOutOfMemory) when the
  // host cannot hold it.
  OnednnKVCache(const KVCacheSpec& spec, OnednnDevice& device, CpuPath path);

  const KVCacheSpec& spec() const override { return spec_; }
  uint64_t memory_bytes() const override {
    return 2 * layer_bytes_ * static_cast<uint64_t>(spec_.n_layers);
  }
  KVLayerView layer(int32_t layer) override;
  void copy_blocks(int64_t src_block, int64_t dst_block, int64_t n) override;
  void export_slots(int64_t n_slots, std::vector<uint8_t>& host_out) override;
  void import_slots(int64_t n_slots, const std::vector<uint8_t>& host_in) override;

 private:
  // Whether a cache of `dtype` is kept in tiles on `path`.
  static bool tiled(CpuPath path, DType dtype);
  uint64_t slot_bytes() const;
  // Slot `slot` of the K or V storage at `base` as a row, and back.
  void read_slot(const uint8_t* base, TilePart part, int64_t slot, uint8_t* row) const;
  void write_slot(uint8_t* base, TilePart part, int64_t slot, const uint8_t* row) const;

  KVCacheSpec spec_;
  bool tiled_;
  uint64_t layer_bytes_;             // bytes of K (or V) of one layer
  std::unique_ptr<Buffer> storage_;  // [layer][k|v][slot][head][dim], or tiles of slots
};

}  // namespace duet::onednn
