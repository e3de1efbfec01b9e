// The onednn backend's KV cache in both its layouts — slot rows, and the
// q8_0 tiles it keeps on the VNNI path (kernels/kv_tiles.h) — built
// directly, so that the tiles' conversions are tested on any CPU: the
// conversions are portable code, only the attention that reads tiles needs
// VNNI. Both layouts must import, export and copy blocks alike.
#include "onednn_kv_cache.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "duet/quant.h"
#include "kernels/cpu_features.h"
#include "kernels/kv_tiles.h"
#include "onednn_device.h"
#include "random_floats.h"

namespace duet::onednn {
namespace {

// 40 slots in blocks of 8: not whole tiles, and blocks that start mid-tile.
KVCacheSpec spec_of(DType dtype) { return KVCacheSpec{"contiguous", 2, 3, 64, 40, 8, dtype}; }

// Exported bytes of `n` slots of random rows of `dtype`, as an export lays
// them out.
std::vector<uint8_t> random_export(const KVCacheSpec& spec, int64_t n) {
  const int64_t elements = int64_t{spec.n_kv_heads} * spec.head_dim;
  const auto row =
      static_cast<int64_t>(*dtype_row_bytes(spec.dtype, static_cast<uint64_t>(elements)));
  const int64_t rows = 2 * spec.n_layers * n;
  const std::vector<float> x = testdata::random_floats(static_cast<size_t>(rows * elements), 9);
  std::vector<uint8_t> bytes(static_cast<size_t>(rows * row));
  for (int64_t r = 0; r < rows; ++r) {
    quantize_row(spec.dtype, x.data() + r * elements, bytes.data() + r * row, elements);
  }
  return bytes;
}

TEST(OnednnKVCache, TilesOnlyForQ8OnTheVnniPath) {
  OnednnDevice device;
  EXPECT_EQ(OnednnKVCache(spec_of(DType::kQ8_0), device, CpuPath::kAvx512Vnni).layer(1).tile_slots,
            kTileSlots);
  EXPECT_EQ(OnednnKVCache(spec_of(DType::kQ8_0), device, CpuPath::kAvx512).layer(1).tile_slots, 0);
  EXPECT_EQ(OnednnKVCache(spec_of(DType::kF16), device, CpuPath::kAvx512Vnni).layer(1).tile_slots,
            0);
}

TEST(OnednnKVCache, TilesAndRowsImportExportAndCopyAlike) {
  OnednnDevice device;
  const KVCacheSpec spec = spec_of(DType::kQ8_0);
  OnednnKVCache rows(spec, device, CpuPath::kScalar);
  OnednnKVCache tiles(spec, device, CpuPath::kAvx512Vnni);
  // The tiled storage covers whole tiles: 48 slots for 40.
  EXPECT_EQ(tiles.memory_bytes(), rows.memory_bytes() / 40 * 48);

  const std::vector<uint8_t> in = random_export(spec, 40);
  rows.import_slots(40, in);
  tiles.import_slots(40, in);
  std::vector<uint8_t> from_rows, from_tiles;
  tiles.export_slots(40, from_tiles);
  EXPECT_EQ(from_tiles, in);
  tiles.export_slots(13, from_tiles);  // a part of the first tile's slots
  rows.export_slots(13, from_rows);
  EXPECT_EQ(from_tiles, from_rows);

  for (OnednnKVCache* kv : {&rows, &tiles}) {
    kv->copy_blocks(0, 3, 1);  // slots 0..7 onto 24..31
    kv->copy_blocks(4, 1, 1);  // 32..39 onto 8..15
  }
  rows.export_slots(40, from_rows);
  tiles.export_slots(40, from_tiles);
  EXPECT_EQ(from_tiles, from_rows);
  EXPECT_NE(from_rows, in);  // the copies changed something
}

}  // namespace
}  // namespace duet::onednn
