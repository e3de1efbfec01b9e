// kernels/row_tiles.h — weight matrices repacked for products with many
// activation rows: batched decode, speculative verification and prefill.
//
// The gemv kernels (qgemv.h) read ggml blocks in place, one weight row at a
// time, and end every row with a horizontal sum; with n activation rows they
// unpack each block once but still pay n sets of per-block shuffles and
// scale broadcasts. Row tiles put 16 weight rows side by side instead: one
// 512-bit register holds 4 consecutive elements of each of the 16 rows, so a
// single vpdpbusd against 4 broadcast activation bytes advances all 16 rows'
// dot products at once, every lane belongs to one row, and a product needs no
// shuffle or horizontal sum at all. This is the run-time repacking that
// ik_llama.cpp and llama.cpp's CPU "extra" buffers do, in Duet's own layout.
//
// Every supported format becomes the same tile: each 32-element block of
// each row is written as x = d * u + m with u an unsigned byte and f32 d, m
// (q4_0: u = q, m = -8d; q4_1: m as stored; q5_0: m = -16d; q8_0: u = q +
// 128, m = -128d; q4_k / q5_k: d = super-scale * 6-bit scale and m =
// -(super-min * 6-bit min) of the block's sub-block, both exact in f32).
// So one kernel serves every format, and the per-block result for an
// activation block of unit dx and integer values qx (Q8Activations) is
//   d * dx * Σ(u * qx) + m * (dx * Σqx)
// with the integer sum exact: it is the gemv kernels' arithmetic except for
// the order of the float additions, so the results agree with gemv to float
// rounding (row_tiles_test bounds it) but are not bit-identical to it. Each
// output row's additions run over the blocks in order whatever n is, so a
// row's result does not depend on which other rows share the call.
//
// Memory: 1.25 bytes per weight (a byte per element plus two floats per
// block), about twice a q4 file's matrices; tiles are built once per matrix
// and kept (OnednnOps::Matmul).
#pragma once

#include <cstdint>
#include <memory>

#include "duet/dtype.h"
#include "kernels/cpu_features.h"
#include "kernels/qgemv.h"

namespace duet::onednn {

// Whether pack_row_tiles takes matrices of `t`: q4_0, q4_1, q5_0, q5_1,
// q8_0, q4_k and q5_k (formats whose scales change at most every 32
// elements).
bool row_tiles_type(DType t);

// Whether this build has a row-tile kernel for `path` (the AVX-512 VNNI path;
// vpdpbusd multiplies the unsigned tile bytes by signed activations exactly).
bool row_tiles_path(CpuPath path);

class RowTiles {
 public:
  static constexpr int kRows = 16;  // weight rows per tile (one per 32-bit lane)
  static constexpr int kBlock = 32;
  // Bytes of one block of a tile: d[16], m[16] as f32, then 8 vectors of 64
  // bytes, vector j holding elements 4j..4j+3 of rows 0..15 (row r at bytes
  // 4r..4r+3).
  static constexpr int64_t kBlockBytes = 2 * kRows * 4 + kBlock * kRows;

  // Empty tiles for a [rows, k] matrix: REQUIRES rows ≥ 1, k a positive
  // multiple of 32. Throws duet::Error(kOutOfMemory) naming the size.
  RowTiles(int64_t rows, int64_t k);

  // Fills tiles [tile_begin, tile_end) from the matrix w of `type` (row r at
  // w + r * dtype_row_bytes(type, k)); rows past the matrix's last are zero
  // (d = m = 0). REQUIRES row_tiles_type(type), k a multiple of the type's
  // block. Thread-safe for disjoint tile ranges.
  void pack(DType type, const void* w, int64_t tile_begin, int64_t tile_end);

  int64_t rows() const { return rows_; }
  int64_t k() const { return k_; }
  int64_t tiles() const { return tiles_; }
  int64_t blocks() const { return k_ / kBlock; }
  int64_t bytes() const { return tiles_ * blocks() * kBlockBytes; }
  // Tile t's first block; block b is kBlockBytes * b further on.
  const uint8_t* tile(int64_t t) const { return data_.get() + t * blocks() * kBlockBytes; }

 private:
  struct AlignedFree {
    void operator()(uint8_t* p) const;
  };
  int64_t rows_;
  int64_t k_;
  int64_t tiles_;
  std::unique_ptr<uint8_t[], AlignedFree> data_;
};

// y[i * ldy + r] = Σ_c W[r, c] * x_i[c] for the n activation rows xq[0..n)
// and every weight row r of tiles [tile_begin, tile_end) that exists (r <
// tiles.rows()). REQUIRES row_tiles_path(path), xq[i].k() == tiles.k(), n ≥
// 1, ldy ≥ tiles.rows(). Activations of one or two terms (any mix). Throws
// duet::Error(kInternal) for a path this build has no kernel for.
// Thread-safe for disjoint tile ranges.
void row_tiles_product(CpuPath path, const RowTiles& tiles, const Q8Activations* xq, int64_t n,
                       float* y, int64_t ldy, int64_t tile_begin, int64_t tile_end);

}  // namespace duet::onednn
