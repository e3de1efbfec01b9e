// The onednn backend's KV cache in both its layouts — slot rows, and the
// tiles it keeps for q8_0 on the VNNI path and, with f16_cache_tiles, for
// f16 on the AVX-512 paths (kernels/kv_tiles.h) — built directly, so that
// the tiles' conversions are tested on any CPU: the conversions are
// portable code, only the attention that reads tiles needs AVX-512. Both
// layouts must write, import, export and copy blocks alike.
#include "onednn_kv_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <tuple>
#include <vector>

#include "duet/host_device.h"
#include "duet/quant.h"
#include "kernels/cpu_features.h"
#include "kernels/kv_tiles.h"
#include "random_floats.h"

namespace duet::onednn {
namespace {

KVCacheSpec spec_of(DType dtype, int64_t capacity = 48, int32_t block_tokens = 8) {
  return KVCacheSpec{"contiguous", 2, 3, 64, capacity, block_tokens, dtype};
}

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

TEST(OnednnKVCache, TilesForQ8OnTheVnniPathAndF16OnAvx512) {
  HostDevice device{"onednn", HostMemory::kLazyPages};
  EXPECT_EQ(OnednnKVCache(spec_of(DType::kQ8_0), device, CpuPath::kAvx512Vnni).layer(1).tile_slots,
            kTileSlots);
  EXPECT_EQ(OnednnKVCache(spec_of(DType::kQ8_0), device, CpuPath::kAvx512).layer(1).tile_slots, 0);
  // f16 tiles turned off (f16_cache_tiles: false).
  EXPECT_EQ(OnednnKVCache(spec_of(DType::kF16), device, CpuPath::kAvx512Vnni, {.f16 = false})
                .layer(1)
                .tile_slots,
            0);
  // A cache a plugin's attention reads keeps rows, whatever its type.
  for (DType dtype : {DType::kF16, DType::kQ8_0}) {
    EXPECT_EQ(OnednnKVCache(spec_of(dtype), device, CpuPath::kAvx512Vnni, {.rows = true})
                  .layer(1)
                  .tile_slots,
              0)
        << dtype_name(dtype);
  }
  const KVTileRules f16{.f16 = true};
  for (CpuPath path : {CpuPath::kAvx512, CpuPath::kAvx512Vnni}) {
    EXPECT_EQ(OnednnKVCache(spec_of(DType::kF16), device, path, f16).layer(1).tile_slots,
              kTileSlots);
  }
  for (CpuPath path : {CpuPath::kScalar, CpuPath::kAvx2}) {
    EXPECT_EQ(OnednnKVCache(spec_of(DType::kF16), device, path, f16).layer(1).tile_slots, 0);
  }
  EXPECT_EQ(
      OnednnKVCache(spec_of(DType::kF32), device, CpuPath::kAvx512Vnni, f16).layer(1).tile_slots,
      0);
  // Batch-invariant: blocks of 8 cut tiles, so rows; blocks of 16 keep them.
  EXPECT_EQ(OnednnKVCache::tile_slots(spec_of(DType::kF16, 48, 8), CpuPath::kAvx512,
                                      {.batch_invariant = true}),
            0);
  EXPECT_EQ(OnednnKVCache::tile_slots(spec_of(DType::kF16, 48, 16), CpuPath::kAvx512,
                                      {.batch_invariant = true}),
            kTileSlots);
  // The tiled storage covers whole tiles: 48 slots for 40.
  const KVCacheSpec spec = spec_of(DType::kQ8_0, 40);
  EXPECT_EQ(OnednnKVCache(spec, device, CpuPath::kAvx512Vnni).memory_bytes(),
            OnednnKVCache(spec, device, CpuPath::kScalar).memory_bytes() / 40 * 48);
}

// Blocks of 8 slots cut tiles (copied slot by slot); blocks of 16 are whole
// tiles (copied as bytes). q8_0 and f16 tiles.
class OnednnKVCacheBlocks : public ::testing::TestWithParam<std::tuple<int32_t, DType>> {};

TEST_P(OnednnKVCacheBlocks, TilesAndRowsImportExportAndCopyAlike) {
  HostDevice device{"onednn", HostMemory::kLazyPages};
  const auto [block_tokens, dtype] = GetParam();
  const KVCacheSpec spec = spec_of(dtype, 48, block_tokens);  // three tiles
  OnednnKVCache rows(spec, device, CpuPath::kScalar);
  OnednnKVCache tiles(spec, device, CpuPath::kAvx512Vnni, {.f16 = true});
  ASSERT_EQ(tiles.layer(0).tile_slots, kTileSlots);
  const std::vector<uint8_t> in = random_export(spec, 40);  // the last 8 slots stay zero
  rows.import_slots(40, in);
  tiles.import_slots(40, in);
  std::vector<uint8_t> from_rows, from_tiles;
  tiles.export_slots(40, from_tiles);
  EXPECT_EQ(from_tiles, in);
  tiles.export_slots(13, from_tiles);  // a part of the first tile's slots
  rows.export_slots(13, from_rows);
  EXPECT_EQ(from_tiles, from_rows);

  const int32_t b = spec.block_tokens;
  for (OnednnKVCache* kv : {&rows, &tiles}) {
    kv->copy_blocks(0, 32 / b, 1);  // slots [0, b) onto [32, 32 + b)
    kv->copy_blocks(16 / b, 0, 1);  // [16, 16 + b) onto [0, b)
  }
  // The same copies on the imported rows, by hand: 48 slots per part, the
  // last 8 zero.
  const size_t row = in.size() / (2 * spec.n_layers * 40);
  std::vector<uint8_t> want(2 * spec.n_layers * 48 * row, 0);
  for (size_t part = 0; part < 2 * static_cast<size_t>(spec.n_layers); ++part) {
    uint8_t* slots = want.data() + part * 48 * row;
    std::copy_n(in.begin() + static_cast<std::ptrdiff_t>(part * 40 * row), 40 * row, slots);
    std::copy_n(slots, b * row, slots + 32 * row);
    std::copy_n(slots + 16 * row, b * row, slots);
  }
  rows.export_slots(48, from_rows);
  tiles.export_slots(48, from_tiles);
  EXPECT_EQ(from_rows, want);
  EXPECT_EQ(from_tiles, want);
}

INSTANTIATE_TEST_SUITE_P(BlockSizesAndTypes, OnednnKVCacheBlocks,
                         ::testing::Combine(::testing::Values(8, 16),
                                            ::testing::Values(DType::kQ8_0, DType::kF16)));

// write() stores a step's rows in either layout as the same bytes:
// exported, the tiles give what the rows give.
TEST(OnednnKVCache, TilesAndRowsWriteAlike) {
  HostDevice device{"onednn", HostMemory::kLazyPages};
  for (DType dtype : {DType::kQ8_0, DType::kF16}) {
    const KVCacheSpec spec = spec_of(dtype, 48, 16);
    OnednnKVCache rows(spec, device, CpuPath::kScalar);
    OnednnKVCache tiles(spec, device, CpuPath::kAvx512Vnni, {.f16 = true});
    // Slots 3, 17 and 30: lanes 3, 1 and 14 of three tiles.
    StepBatch step;
    step.n_tokens = 3;
    step.slot_mapping = {3, 17, 30};
    const int64_t kv_row = int64_t{spec.n_kv_heads} * spec.head_dim;
    std::vector<float> k = testdata::random_floats(static_cast<size_t>(3 * kv_row), 11);
    std::vector<float> v = testdata::random_floats(static_cast<size_t>(3 * kv_row), 12);
    const TensorView kt{k.data(), DType::kF32, {3, kv_row}};
    const TensorView vt{v.data(), DType::kF32, {3, kv_row}};
    for (int32_t l = 0; l < spec.n_layers; ++l) {
      rows.write(l, step, kt, vt);
      tiles.write(l, step, kt, vt);
    }
    std::vector<uint8_t> from_rows, from_tiles;
    rows.export_slots(48, from_rows);
    tiles.export_slots(48, from_tiles);
    EXPECT_EQ(from_tiles, from_rows) << dtype_name(dtype);
  }
}

}  // namespace
}  // namespace duet::onednn
