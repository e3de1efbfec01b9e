// onednn_kv_cache.h — K and V of every layer in host memory: f32, f16 or
// q8_0.
#pragma once

#include <vector>

#include "duet/host_device.h"
#include "duet/row_kv_cache.h"
#include "kernels/cpu_features.h"
#include "kernels/kv_tiles.h"
#include "vector_kernels.h"

namespace duet::onednn {

// What besides the dtype and the CPU path decides whether a cache is kept
// in tiles.
struct KVTileRules {
  // Tiles only when block_tokens is a multiple of 16: attention's
  // arithmetic over a q8_0 tile depends on which of its slots a run covers,
  // so in batch-invariant mode a position's tile lane must follow from the
  // position alone, not from where its block lies.
  bool batch_invariant = false;
  bool f16 = true;    // f16 in tiles too (backend option f16_cache_tiles)
  bool rows = false;  // slot rows whatever the type (a plugin's attention reads them)
};

// Core's slot-row storage (duet/row_kv_cache.h): f16 halves the memory
// and, more to the point, what decode attention reads per token — at 2,048
// cached positions SmolLM2's f32 cache is 94 MB, as much as its weights —
// and q8_0 (34 bytes per 32 elements) nearly halves it again. The storage
// starts zeroed and its pages become resident only as positions are
// written. write() converts rows with the SIMD kernels of the CPU path
// (the same bytes as quantize_row).
//
// On the VNNI path a q8_0 cache is kept in tiles of 16 slots instead
// (kernels/kv_tiles.h; layer() reports tile_slots = 16), the layout its
// attention multiplies without shuffling bytes, and so is an f16 cache on
// both AVX-512 paths (unless the backend option f16_cache_tiles is false),
// its keys dimension-major; a cache that a plugin's attention reads
// (Backend::create_kv_cache_rows) keeps rows. The capacity is rounded up to
// whole tiles. copy_blocks and the exports and imports (of slots from 0 or
// of any range) move rows either way, so the two layouts exchange caches.
class OnednnKVCache final : public RowKVCache {
 public:
  // Why `spec` cannot be stored here; empty when it can.
  static Support check(const KVCacheSpec& spec);
  // The tile_slots layer() reports for a cache of `spec` on `path`: 16 for
  // q8_0 on the VNNI path and, with rules.f16, f16 on the AVX-512 paths;
  // else, and always with rules.rows, 0 (rows).
  static int32_t tile_slots(const KVCacheSpec& spec, CpuPath path, KVTileRules rules = {});

  // REQUIRES: check(spec).ok(). Throws duet::Error(kOutOfMemory) when the
  // host cannot hold it.
  OnednnKVCache(const KVCacheSpec& spec, HostDevice& device, CpuPath path, KVTileRules rules = {});

  KVLayerView layer(int32_t layer) override;
  void write(int32_t layer, const StepBatch& step, const TensorView& k,
             const TensorView& v) override;
  void copy_blocks(int64_t src_block, int64_t dst_block, int64_t n) override;
  void export_slots(int64_t n_slots, std::vector<uint8_t>& host_out) override;
  void import_slots(int64_t n_slots, const std::vector<uint8_t>& host_in) override;
  void export_slot_range(int64_t first_slot, int64_t n_slots,
                         std::vector<uint8_t>& host_out) override;
  void import_slot_range(int64_t first_slot, int64_t n_slots,
                         const std::vector<uint8_t>& host_in) override;

 private:
  // Slot `slot` of the K or V storage at `base` as a row, and back.
  void read_slot(const uint8_t* base, TilePart part, int64_t slot, uint8_t* row) const;
  void write_slot(uint8_t* base, TilePart part, int64_t slot, const uint8_t* row) const;

  bool tiled_;
  const VectorKernels& kernels_;
  std::vector<uint8_t> row_;  // a converted row on its way into tiles
};

}  // namespace duet::onednn
