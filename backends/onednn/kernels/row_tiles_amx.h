// kernels/row_tiles_amx.h — the row-tile product (row_tiles.h) on Intel AMX,
// for prompts and other products of many activation rows.
//
// An AMX tile multiply (tdpbsud) takes a 16 x 32 tile of signed activation
// bytes and a 32 x 16 tile of unsigned weight bytes and adds their 16 x 16
// integer product to a tile of int32 sums: 8,192 multiply-adds per
// instruction, where a vpdpbusd does 64. Its weight tile has the layout of
// a row tile's block exactly — row j of it holds elements 4j..4j+3 of each
// of the 16 weight rows — so kBytes and kHalves blocks load as they are and
// the nibble formats are unpacked once per tile into a scratch
// buffer of that layout. Each 32-element block keeps its own scales, so the kernel
// multiplies one block at a time, stores the 16 x 16 sums and scales them
// in AVX-512 exactly as the VNNI kernel does its sums (d * dx, plus the
// offset m times dx * Σqx; two terms as 256 * Σ(u * qa) + Σ(u * qb); kHalves
// per 16-element half): the same integers and the same float operations in
// the same order, so the results equal row_tiles_avx512_vnni's bit for bit.
//
// The activation rows go to the tiles from one buffer in tile order
// (AmxActivations), 16 rows per group, rows past the last zero.
#pragma once

#include <cstdint>
#include <memory>

#include "kernels/qgemv.h"
#include "kernels/row_tiles.h"

namespace duet::onednn {

// Activation rows quantized as Q8Activations, regrouped for AMX tiles:
// for each group of 16 rows and each 32-element block, the rows' 32 bytes
// of the first term (a 16 x 32 tile, 512 bytes), then those of the second
// (two terms only), then per row the block's unit dx and dx * Σqx, then per
// row its two half-block sums (Q8Activations::half_scales()). Buffers grow
// on demand and are kept.
class AmxActivations {
 public:
  static constexpr int kRows = 16;  // activation rows per tile
  static constexpr int64_t kTileBytes = int64_t{kRows} * RowTiles::kBlock;  // one term's tile

  // Sizes the buffers for n rows of k values (k a multiple of 32) in
  // `terms` (1 or 2) terms; the contents are undefined until pack(), or
  // clear_padding() and pack_row() of every row.
  // Throws duet::Error(kOutOfMemory) naming the size, leaving the object
  // as it was.
  void reset(int64_t n, int64_t k, int terms);
  // Fills every block from xq[0..n) (rows past n: zeros): clear_padding()
  // and pack_row() of each row (the matmul packs row by row; tests and
  // benchmarks pack at once).
  // REQUIRES reset(n, k, terms) with every xq[i].k() == k and
  // xq[i].terms() == terms.
  void pack(const Q8Activations* xq);
  // Row `row` (< rows()) of every block of its group from x, so that each
  // row can be packed by the thread that quantized it. REQUIRES as pack()
  // for x. Thread-safe for distinct rows.
  void pack_row(const Q8Activations& x, int64_t row);
  // Zeros the rows of the last group past rows() (their scales and sums
  // too), so that they add nothing.
  void clear_padding();

  int64_t rows() const { return n_; }
  int64_t k() const { return k_; }
  int terms() const { return terms_; }
  int64_t groups() const { return (n_ + kRows - 1) / kRows; }
  int64_t blocks() const { return k_ / RowTiles::kBlock; }
  // Bytes of one group's block with `terms` terms: the terms' tiles, the
  // scales, the half sums.
  static constexpr int64_t block_bytes(int terms) {
    return terms * kTileBytes + 4 * kRows * int64_t{sizeof(float)};
  }
  int64_t block_bytes() const { return block_bytes(terms_); }
  // Group g's block b: the first term's tile (rows 32 bytes apart), the
  // second's 512 bytes on, then 2 * kRows floats of scales (dx, dx * Σqx
  // per row) and 2 * kRows of half sums. 64-byte aligned.
  const int8_t* block(int64_t g, int64_t b) const {
    return data_.get() + (g * blocks() + b) * block_bytes();
  }

 private:
  struct AlignedFree {
    void operator()(int8_t* p) const;
  };
  // Replaces the buffer by one of `bytes` (contents lost).
  void grow(int64_t bytes);
  // Group g's block b, writable: the terms' tiles, the scales, the half sums.
  struct Parts {
    int8_t* tiles;
    float* scales;
    float* half_sums;
  };
  Parts parts(int64_t g, int64_t b);
  int64_t n_ = 0;
  int64_t k_ = 0;
  int terms_ = 1;
  int64_t capacity_ = 0;  // bytes
  std::unique_ptr<int8_t[], AlignedFree> data_;
};

// y[i * ldy + r] = Σ_c W[r, c] * x_i[c] for the activation rows x of `act`
// and every weight row r of tiles [tile_begin, tile_end) that exists:
// row_tiles_product's results, bit for bit. REQUIRES amx_int8_usable(),
// act.k() == tiles.k(), ldy ≥ tiles.rows(). Throws duet::Error(kInternal)
// when AMX is not usable or k differs. Thread-safe for disjoint tile
// ranges; each call configures and releases the calling thread's tiles.
void row_tiles_product_amx(const RowTiles& tiles, const AmxActivations& act, float* y, int64_t ldy,
                           int64_t tile_begin, int64_t tile_end);

}  // namespace duet::onednn
