// kernels/row_tiles_amx_bf16.h — the row-tile product (row_tiles.h) on the
// AMX tile unit's bf16 products, for prompts and batches of many rows.
//
// The int8 tile kernel (row_tiles_amx.h) must leave the tile unit after
// every 32-element block: each block has its own weight scales, so its
// integer sums are stored and folded into float accumulators one block at a
// time, and a tile store costs as much as the product. Here each weight is
// dequantized to f32 (d * u + m, one rounding) and split into two bf16, hi
// (its upper 16 bits) and the rest lo, and each activation likewise (hi the
// nearest bf16), so that the tile unit sums x_hi * w_hi + x_lo * w_hi +
// x_hi * w_lo over the whole of k in f32 and the sums leave the tile unit
// once per 16 x 16 outputs. What is dropped — the splits' remainders, under
// 2^-16 of a weight and 2^-17 of an activation, and x_lo * w_lo, under
// 2^-16 of the product — is below the two 8-bit activation terms' rounding:
// on random rows of q4_1, q6_k and q8_0 weights the results lie 2.1e-11 to
// 4.3e-11 (normalised squared error) from a double product of the
// dequantized weights, the int8 kernels' 2.1e-10 to 2.3e-10
// (tests/onednn_row_tiles_test.cc). They are not the VNNI kernel's bits.
//
// The weight tiles are dequantized and split two at a time, for all of k,
// into a scratch buffer per thread (2 KiB per 32-element block and tile),
// then multiplied with every activation group: each group of 16 rows and
// each pair of weight tiles keeps four f32 accumulator tiles.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>

#include "kernels/row_tiles.h"

namespace duet::onednn {

// Activation rows split into bf16 hi and lo, regrouped for the tile unit:
// for each group of 16 rows and each 32-element block, the rows' 32 hi
// values (a 16 x 32 bf16 tile, 1 KiB), then their lo values (another).
// Rows past the last are zeros. The buffer grows on demand and is kept.
class AmxBf16Rows {
 public:
  static constexpr int kRows = 16;                                              // rows per group
  static constexpr int64_t kTileBytes = int64_t{kRows} * RowTiles::kBlock * 2;  // one bf16 tile
  static constexpr int64_t kBlockBytes = 2 * kTileBytes;                        // hi and lo

  // Sizes the buffer for n rows of k values (k a multiple of 32) and zeros
  // the last group's rows past n; the other rows are undefined until
  // pack_row(). Throws duet::Error(kOutOfMemory) naming the size, leaving
  // the object as it was.
  void reset(int64_t n, int64_t k);
  // Row `row` (< rows()) from its k values at x (any alignment). REQUIRES
  // amx_bf16_usable(). Thread-safe for distinct rows.
  void pack_row(const float* x, int64_t row);

  int64_t rows() const { return n_; }
  int64_t k() const { return k_; }
  int64_t groups() const { return (n_ + kRows - 1) / kRows; }
  int64_t blocks() const { return k_ / RowTiles::kBlock; }
  // Group g's block b: its hi tile (rows 64 bytes apart), then its lo tile.
  // 64-byte aligned.
  const uint8_t* block(int64_t g, int64_t b) const {
    return data_.get() + (g * blocks() + b) * kBlockBytes;
  }

 private:
  struct AlignedFree {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  uint8_t* mutable_block(int64_t g, int64_t b) {
    return data_.get() + (g * blocks() + b) * kBlockBytes;
  }
  int64_t n_ = 0;
  int64_t k_ = 0;
  int64_t capacity_ = 0;  // bytes
  std::unique_ptr<uint8_t[], AlignedFree> data_;
};

// y[i * ldy + r] = Σ_c W[r, c] * x_i[c] for the activation rows x of `act`
// and every weight row r of tiles [tile_begin, tile_end) that exists, W the
// tiles' weights dequantized. REQUIRES amx_bf16_usable(), act.k() ==
// tiles.k(), ldy ≥ tiles.rows(). Throws duet::Error(kInternal) when the
// tile unit is not usable or k differs. Thread-safe for disjoint tile
// ranges; each call configures and releases the calling thread's tiles.
void row_tiles_product_amx_bf16(const RowTiles& tiles, const AmxBf16Rows& act, float* y,
                                int64_t ldy, int64_t tile_begin, int64_t tile_end);

}  // namespace duet::onednn
