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
// Four tile formats carry every supported type:
//  * nibbles (q4_0, q4_1, iq4_nl): the blocks' own bytes regrouped — f16 d
//    and m per row, then 16 bytes per row whose low nibbles are elements
//    0..15 and high nibbles elements 16..31 — so tiles take exactly the
//    file's 0.625 bytes per weight, and decode, which streams every weight
//    once per token, reads no more than from the file's blocks. The kernel
//    unpacks the nibbles with two ANDs and a shift per vector. q4_0 keeps m
//    unused: its offset is -8d. iq4_nl keeps m unused too: its nibbles
//    index the 16 levels, which the VNNI kernel looks up as u = level + 128
//    with one vpshufb per vector (offset -128d); AVX2 has no kernel for
//    them (its 16-bit sums would saturate on those bytes).
//  * super-nibbles (q4_k): per 256-element super-block the rows' f16 d and
//    dmin, their eight 6-bit sub-block scales and minimums as bytes, and
//    the super-block's nibbles as the file keeps them (sub-blocks 2p and
//    2p + 1 in the low and high nibbles of the same 32 bytes): 0.578 bytes
//    per weight against the file's 0.5625, so decode's single row takes
//    them too. The kernel forms each sub-block's d = d * scale and m =
//    -(dmin * min), exact in f32: the bytes format's scales, so the same
//    results bit for bit.
//  * bytes (q5_0, q5_1, q8_0, q5_k): each 32-element block of
//    each row as x = d * u + m with u an unsigned byte and f32 d, m (q5_0:
//    m = -16d; q8_0: u = q + 128, m = -128d; q5_k: d =
//    super-scale * 6-bit scale and m = -(super-min * 6-bit min) of the
//    block's sub-block, both exact in f32): 1.25 bytes per weight, for
//    products of several rows.
//  * halves (q2_k, q3_k, q6_k, whose scales change every 16 elements): the
//    bytes' layout with a d and an m per 16-element half block (q6_k: u =
//    q + 32, d = super-scale * int8 scale, m = -32d; q3_k: u = q + 4, d =
//    super-scale * (6-bit scale - 32), m = -4d; q2_k: u = q, d = super-scale
//    * 4-bit scale, m = -(super-min * 4-bit min); all exact in f32): 1.5
//    bytes per weight (3.5-4.5 times a q2_k or q3_k file), for products of
//    several rows.
// So one kernel serves every type, and the per-block result for an
// activation block of unit dx and integer values qx (Q8Activations) is
//   d * dx * Σ(u * qx) + m * (dx * Σqx)
// (for halves, that per half block, with Q8Activations::half_scales()).
// with the integer sum exact: it is the gemv kernels' arithmetic except for
// the order of the float additions, so the results agree with gemv to float
// rounding (row_tiles_test bounds it) but are not bit-identical to it. Each
// output row's additions run over the blocks in order whatever n is, so a
// row's result does not depend on which other rows share the call.
//
// Tiles are built once per matrix and kept (RowTilesCache): memory on top of
// the model's own copy of the weights.
#pragma once

#include <cstdint>
#include <memory>

#include "duet/dtype.h"
#include "kernels/cpu_features.h"
#include "kernels/qgemv.h"

namespace duet::onednn {

// Whether RowTiles take matrices of `t`: q4_0, q4_1, q5_0, q5_1, q8_0,
// iq4_nl and the K-quants q2_k, q3_k, q4_k, q5_k, q6_k.
bool row_tiles_type(DType t);

// Whether `t`'s tiles hold its nibbles as the file does (q4_0, q4_1,
// iq4_nl, q4_k): about the file's size, so a product of one row streams no
// more bytes from them than from the file's blocks. REQUIRES
// row_tiles_type(t).
bool nibble_tiles(DType t);

// Whether this build has a row-tile kernel for `path` and some type: the
// AVX-512 VNNI path for every row_tiles_type (vpdpbusd multiplies the
// unsigned tile bytes by signed activations exactly), the AVX2 path for
// the nibble tiles of q4_0, q4_1 and q4_k (vpmaddubsw, whose 16-bit sums
// only raw nibbles keep from saturating). The AVX-512 path without VNNI
// has none: its gemv kernels, which take up to 8 rows per weight block,
// measured level with the AVX2 tile kernel (qgemv_bench, q4_1 [1536,
// 576], 1 and 16 rows).
bool row_tiles_path(CpuPath path);

// Whether `path` has a kernel for `t`'s tiles.
bool row_tiles_kernel(CpuPath path, DType t);

// Whether a product of one activation row is faster on `t`'s tiles than on
// the gemv kernel, on `path`: nibble, fifth-bit, six-bit and q8_0 tiles on
// AVX-512 VNNI (q4_k's one row 1.8x faster, qgemv_bench [8192, 2048];
// iq4_nl's [1536, 576] 2.8x, q5_0's 2.6x, q6_k's [576, 1536] 1.4x; in the
// model, 2 threads on the Xeon with AMX of 2026-12-05: SmolLM2 Q4_K_M,
// mostly q5_0, decodes 160 -> 234 t/s, and with q8_0's tiles, 36 bytes per
// 32 weights against the file's 34, SmolLM2 Q4_1 281 -> 298, Q6_K 154 ->
// 175, the 1B-shaped Q8_0 20.9 -> 21.8; q6_k's tiles, 28 bytes per 32
// against 26.25, SmolLM2 Q6_K 177 -> 200, Q4_K_M 271 -> 278, the 1B-shaped
// Q4_K_M 31.7 -> 32.4), q4_0, q4_1, q5_0 and q5_1 also on AVX2 (SmolLM2
// Q5_0 with DUET_CPU_PATH=avx2 on a Zen 4, 2 threads: 132-134 -> 168-198
// t/s; Q4_K_M, mostly q5_0, 123-142 -> 179-201); not q4_k on AVX2
// (1B-shaped Q4_K_M decode, one thread: 9.3-9.5 t/s on tiles against
// 10.7-12.0 on gemv); q5_k's tiles (q4_k's and a plane of fifth bits, 180
// bytes per 256 against the file's 176): the 1B-shaped Q5_K_M 25.6 ->
// 27.7 t/s. The half-block tiles (q2_k, q3_k) stream 1.5 bytes per weight,
// against the file's 0.33-0.43. REQUIRES row_tiles_type(t).
bool row_tiles_from_one_row(CpuPath path, DType t);

enum class TileFormat {
  kNibbles,        // q4_0, q4_1, iq4_nl: 16 + 16 f16 scales and 256 bytes of nibbles per block
  kFiveBits,       // q5_0, q5_1: kNibbles' block, then 64 bytes of fifth bits
  kSuperNibbles,   // q4_k: per super-block 16 + 16 f16, 128 + 128 scale bytes, 2048 of nibbles
  kSuperFiveBits,  // q5_k: kSuperNibbles' super-block, then 8 * 64 bytes of fifth bits
  kBytes,          // q8_0: 64 bytes of f32 scales, 512 of bytes
  kHalves,         // q2_k, q3_k: 4 * 64 bytes of f32 scales (per half block), 512 of bytes
  kSixBits,        // q6_k: 16 f16 d, 16 + 16 int8 scales, 256 bytes of nibbles, 128 of 2-bit highs
};

// Whether `f`'s blocks scale each half (16 elements) on its own: the
// activations' half sums and the kernels' half-block products.
constexpr bool half_scales(TileFormat f) {
  return f == TileFormat::kHalves || f == TileFormat::kSixBits;
}

// Whether `f`'s tiles go by super-blocks of RowTiles::kSubBlocks blocks.
constexpr bool super_blocks(TileFormat f) {
  return f == TileFormat::kSuperNibbles || f == TileFormat::kSuperFiveBits;
}

// The format `t`'s tiles take. REQUIRES row_tiles_type(t).
TileFormat tile_format(DType t);

class RowTiles {
 public:
  static constexpr int kRows = 16;  // weight rows per tile (one per 32-bit lane)
  static constexpr int kBlock = 32;
  static constexpr int kSubBlocks = 8;  // blocks per kSuperNibbles super-block
  // Offsets in a kSuperNibbles super-block (see pack()): the scale bytes
  // (after the f16 d and dmin), the min bytes, the nibbles (kSuperHeaderBytes),
  // and all its bytes: whole 64-byte lines, so each stays aligned.
  static constexpr int64_t kSuperScalesAt = 2 * kRows * 2;
  static constexpr int64_t kSuperMinsAt = kSuperScalesAt + kSubBlocks * kRows;
  static constexpr int64_t kSuperHeaderBytes = kSuperMinsAt + kSubBlocks * kRows;
  static constexpr int64_t kSuperBytes = kSuperHeaderBytes + kSubBlocks * kBlock / 2 * kRows;
  static_assert(kSuperHeaderBytes % 64 == 0 && kSuperBytes % 64 == 0 &&
                kSuperBytes % kSubBlocks == 0);
  // A kSuperFiveBits super-block: kSuperBytes, then each block's fifth bits
  // (64 bytes, as kFiveBits').
  static constexpr int64_t kSuperFiveBytes = kSuperBytes + kSubBlocks * kBlock / 8 * kRows;
  static_assert(kSuperFiveBytes % kSubBlocks == 0);

  // Empty tiles for a [rows, k] matrix of `type`: REQUIRES
  // row_tiles_type(type), rows ≥ 1, k a positive multiple of the type's
  // block. Throws duet::Error(kOutOfMemory) naming the size.
  RowTiles(DType type, int64_t rows, int64_t k);

  // Fills tiles [tile_begin, tile_end) from the matrix w (row r at w + r *
  // dtype_row_bytes(type, k)); rows past the matrix's last are zero (d = m =
  // 0). Thread-safe for disjoint tile ranges.
  //
  // A block of a tile: the rows' d (16 values), then their m, then the
  // quants as 64-byte vectors whose 32-bit lane r belongs to row r:
  //   kBytes:   f32 d (q8_0's m, -128d, is derived: 576 bytes a block,
  //             not 640 — the LM head of a Q4_1 or Q8_0 file is a q8_0
  //             matrix); 8 vectors, vector j holding u of elements
  //             4j..4j+3 (one byte each).
  //   kHalves:  f32 d of elements 0..15, d of 16..31, then m of each half
  //             (four arrays of 16), then the 8 vectors of kBytes.
  //   kNibbles: f16 scales; 4 vectors, vector j holding the block's bytes
  //             qs[4j..4j+3]: elements 4j..4j+3 in the low nibbles, 16+4j..
  //             16+4j+3 in the high.
  //   kSixBits: the rows' f16 super-block d (repeated in each block), the
  //             int8 scales of the block's first half (16 rows), then of its
  //             second, the 4 nibble vectors of kNibbles (q's low 4 bits),
  //             then 2 vectors of q's high 2 bits: bits 2J..2J+1 of byte i
  //             of lane r in vector 0 are those of element 4J + i (J < 4),
  //             in vector 1 those of element 16 + 4J + i; m = -32 * d of
  //             each half (q6_k's offset), derived.
  //   kFiveBits: kNibbles' block, then one vector of the elements' fifth
  //             bits: bit J of byte i of lane r is that of element 4J + i
  //             (bit 4J + i of the row's qh), which joins the byte that
  //             nibble unpacking gives for element 4J + i (J < 4: vector
  //             J's low nibble; J ≥ 4: vector J - 4's high).
  // kSuperNibbles tiles go by super-blocks of kSubBlocks blocks instead
  // (block_bytes() is an eighth of one): the rows' f16 d, their f16 dmin,
  // then sub-block s's 16 scale bytes for s = 0..7, then the 8 min bytes
  // likewise, then four groups of 8 vectors, group p's vector j holding the
  // super-block's qs[32p + 4j .. 32p + 4j + 3]: elements 64p + 4j.. (of
  // sub-block 2p) in the low nibbles, 64p + 32 + 4j.. (sub-block 2p + 1) in
  // the high.
  void pack(const void* w, int64_t tile_begin, int64_t tile_end);

  DType type() const { return type_; }
  TileFormat format() const { return format_; }
  int64_t rows() const { return rows_; }
  int64_t k() const { return k_; }
  int64_t tiles() const { return tiles_; }
  int64_t blocks() const { return k_ / kBlock; }
  // A block's bytes in the tile (kSuperNibbles: a super-block's / kSubBlocks).
  int64_t block_bytes() const;
  int64_t bytes() const { return tiles_ * blocks() * block_bytes(); }
  // Tile t's first block; block b is block_bytes() * b further on.
  const uint8_t* tile(int64_t t) const { return data_.get() + t * blocks() * block_bytes(); }
  // In a kSuperNibbles tile at `tile`: block b's super-block, and the 8
  // nibble vectors (64 bytes each) that hold block b in their low (b even)
  // or high (b odd) nibbles.
  // (super_bytes: kSuperFiveBytes for kSuperFiveBits tiles.)
  static const uint8_t* super_block(const uint8_t* tile, int64_t b,
                                    int64_t super_bytes = kSuperBytes) {
    return tile + b / kSubBlocks * super_bytes;
  }
  static const uint8_t* super_nibbles(const uint8_t* tile, int64_t b,
                                      int64_t super_bytes = kSuperBytes) {
    return super_block(tile, b, super_bytes) + kSuperHeaderBytes +
           b % kSubBlocks / 2 * (kBlock * kRows);
  }

 private:
  struct AlignedFree {
    void operator()(uint8_t* p) const;
  };
  DType type_;
  TileFormat format_;
  int64_t rows_;
  int64_t k_;
  int64_t tiles_;
  std::unique_ptr<uint8_t[], AlignedFree> data_;
};

// y[i * ldy + r] = Σ_c W[r, c] * x_i[c] for the n activation rows xq[0..n)
// and every weight row r of tiles [tile_begin, tile_end) that exists (r <
// tiles.rows()). REQUIRES row_tiles_kernel(path, tiles.type()), xq[i].k() ==
// tiles.k(), n ≥ 1, ldy ≥ tiles.rows(). Activations of one or two terms (any
// mix). Throws duet::Error(kInternal) for a path and type without a kernel
// or a path beyond this CPU's.
// Thread-safe for disjoint tile ranges.
void row_tiles_product(CpuPath path, const RowTiles& tiles, const Q8Activations* xq, int64_t n,
                       float* y, int64_t ldy, int64_t tile_begin, int64_t tile_end);

}  // namespace duet::onednn
