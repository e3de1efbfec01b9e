// The row-tile product (row_tiles.h) on AVX-512 VNNI.
//
// For one tile and up to kMaxVectors activation rows at a time: each block's
// eight 64-byte weight vectors (kBytes: loaded; kNibbles: four loaded and
// split into their low and high nibbles, for iq4_nl then looked up as its
// levels + 128 by vpshufb; kSuperNibbles: eight loaded, each
// the low or the high nibbles) are held in registers and
// multiplied by every activation row, 4 activation bytes broadcast to all 16
// lanes per vpdpbusd; the integer sums then take the block's scales with two
// f32 multiply-adds per row (d * dx, and the offset m times dx * Σqx);
// kHalves tiles keep a sum per 16-element half and take the same two per half;
// kSuperNibbles tiles form a block's d and m from the super-block's f16
// scales and the sub-block's scale and min bytes.
// Registers: 8 weight vectors, the scales, and two accumulators per
// activation row.

#include <cstdint>
#include <cstring>

#include "kernels/avx512_intrinsics.h"
#include "kernels/prefetch.h"
#include "kernels/qgemv_paths.h"
#include "kernels/row_tiles_blocks.h"

namespace duet::onednn::detail {
namespace {

constexpr int kMaxVectors = kRowTilesMaxVectorsVnni;

// 4 activation bytes in every 32-bit lane.
__m512i broadcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof v);
  return _mm512_set1_epi32(v);
}

// Σ over the block of u * x per lane (row), in two chains so that
// consecutive vpdpbusd do not wait on each other: start + the sum.
__m512i block_sum(const __m512i* w, const int8_t* x, __m512i start) {
  __m512i s0 = start;
  __m512i s1 = _mm512_setzero_si512();
#pragma GCC unroll 8
  for (int j = 0; j < kVectorsPerBlock; j += 2) {
    s0 = _mm512_dpbusd_epi32(s0, w[j], broadcast4(x + 4 * j));
    s1 = _mm512_dpbusd_epi32(s1, w[j + 1], broadcast4(x + 4 * j + 4));
  }
  return _mm512_add_epi32(s0, s1);
}

// Σ over one half block (vectors w[0..4), 16 activation bytes) of u * x per
// lane: start + the sum.
__m512i half_sum(const __m512i* w, const int8_t* x, __m512i start) {
  __m512i s0 = _mm512_dpbusd_epi32(start, w[0], broadcast4(x));
  __m512i s1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[1], broadcast4(x + 4));
  s0 = _mm512_dpbusd_epi32(s0, w[2], broadcast4(x + 8));
  s1 = _mm512_dpbusd_epi32(s1, w[3], broadcast4(x + 12));
  return _mm512_add_epi32(s0, s1);
}

// acc + block b of a kHalves tile times activation row xq: per half, the
// integer sum (two terms: 256 * Σ(u * qa) + Σ(u * qb), at most 16 * 63 *
// 127 * 257 < 2^31) scaled by d * dx, and the offset m times the half's
// dx * Σqx.
template <int Terms>
__m512 halves_product(const Block& blk, const Q8Activations& xq, int64_t b, __m512 acc) {
  const int64_t at = b * RowTiles::kBlock;
  constexpr int kHalf = RowTiles::kBlock / 2;
  __m512i lo = half_sum(blk.w, xq.q() + at, _mm512_setzero_si512());
  __m512i hi = half_sum(blk.w + kVectorsPerBlock / 2, xq.q() + at + kHalf, _mm512_setzero_si512());
  if constexpr (Terms == 2) {
    lo = half_sum(blk.w, xq.q_lo() + at, _mm512_slli_epi32(lo, 8));
    hi = half_sum(blk.w + kVectorsPerBlock / 2, xq.q_lo() + at + kHalf, _mm512_slli_epi32(hi, 8));
  }
  const __m512 dx = _mm512_set1_ps(xq.scales()[2 * b]);
  const float* hs = xq.half_scales() + 2 * b;
  acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(lo), _mm512_mul_ps(blk.d, dx), acc);
  acc = _mm512_fmadd_ps(blk.m, _mm512_set1_ps(hs[0]), acc);
  acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(hi), _mm512_mul_ps(blk.d2, dx), acc);
  return _mm512_fmadd_ps(blk.m2, _mm512_set1_ps(hs[1]), acc);
}

// Tile t against activation rows xq[0..NV), all of `Terms` terms.
template <TileFormat F, Offset N, int NV, int Terms>
void tile_rows(const RowTiles& tiles, int64_t t, const Q8Activations* xq, float* y, int64_t ldy) {
  const uint8_t* const tile = tiles.tile(t);  // once: block_bytes() is out of line
  const uint8_t* p = tile;
  const int64_t block_bytes = tiles.block_bytes();
  __m512 acc[NV];
  for (int v = 0; v < NV; ++v) acc[v] = _mm512_setzero_ps();
  for (int64_t b = 0; b < tiles.blocks(); ++b, p += block_bytes) {
    // The hardware prefetchers lose the stream at every tile range a thread
    // claims; prefetches this far ahead keep the next blocks coming from L3
    // or DRAM while this one is multiplied (and past the end never fault).
    prefetch_stream(p, block_bytes);
    Block blk;
    if constexpr (super_blocks(F)) {
      blk = load_super_nibbles<F>(tile, b);
    } else {
      blk = load_block<F, N>(p);
    }
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) {
      const int64_t at = b * RowTiles::kBlock;
      if constexpr (half_scales(F)) {
        acc[v] = halves_product<Terms>(blk, xq[v], b, acc[v]);
        continue;
      }
      __m512i s = block_sum(blk.w, xq[v].q() + at, _mm512_setzero_si512());
      // Two terms: 256 * Σ(u * qa) + Σ(u * qb), at most 32 * 255 * 127 *
      // 257 < 2^31.
      if constexpr (Terms == 2) s = block_sum(blk.w, xq[v].q_lo() + at, _mm512_slli_epi32(s, 8));
      const float* sx = xq[v].scales() + 2 * b;
      acc[v] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(blk.d, _mm512_set1_ps(sx[0])),
                               acc[v]);
      acc[v] = _mm512_fmadd_ps(blk.m, _mm512_set1_ps(sx[1]), acc[v]);
    }
  }
  const int64_t first = t * RowTiles::kRows;
  const int64_t valid =
      tiles.rows() - first < RowTiles::kRows ? tiles.rows() - first : RowTiles::kRows;
  const auto mask = static_cast<__mmask16>((uint32_t{1} << valid) - 1);
  for (int v = 0; v < NV; ++v) {
    _mm512_mask_storeu_ps(y + v * ldy + first, mask, acc[v]);
  }
}

template <TileFormat F, Offset N, int Terms>
void tile_rows_n(const RowTiles& tiles, int64_t t, const Q8Activations* xq, int64_t nv, float* y,
                 int64_t ldy) {
  switch (nv) {
    case 1:
      return tile_rows<F, N, 1, Terms>(tiles, t, xq, y, ldy);
    case 2:
      return tile_rows<F, N, 2, Terms>(tiles, t, xq, y, ldy);
    case 3:
      return tile_rows<F, N, 3, Terms>(tiles, t, xq, y, ldy);
    case 4:
      return tile_rows<F, N, 4, Terms>(tiles, t, xq, y, ldy);
    case 5:
      return tile_rows<F, N, 5, Terms>(tiles, t, xq, y, ldy);
    case 6:
      return tile_rows<F, N, 6, Terms>(tiles, t, xq, y, ldy);
    case 7:
      return tile_rows<F, N, 7, Terms>(tiles, t, xq, y, ldy);
    case 8:
      return tile_rows<F, N, 8, Terms>(tiles, t, xq, y, ldy);
    case 9:
      return tile_rows<F, N, 9, Terms>(tiles, t, xq, y, ldy);
    case 10:
      return tile_rows<F, N, 10, Terms>(tiles, t, xq, y, ldy);
    case 11:
      return tile_rows<F, N, 11, Terms>(tiles, t, xq, y, ldy);
    case 12:
      return tile_rows<F, N, 12, Terms>(tiles, t, xq, y, ldy);
    case 13:
      return tile_rows<F, N, 13, Terms>(tiles, t, xq, y, ldy);
    case 14:
      return tile_rows<F, N, 14, Terms>(tiles, t, xq, y, ldy);
    case 15:
      return tile_rows<F, N, 15, Terms>(tiles, t, xq, y, ldy);
    default:
      return tile_rows<F, N, kMaxVectors, Terms>(tiles, t, xq, y, ldy);
  }
}

// Tiles [tile_begin, tile_end) against nv rows from xq, all of `terms`.
template <TileFormat F, Offset N>
void tiles_rows(const RowTiles& tiles, int64_t tile_begin, int64_t tile_end,
                const Q8Activations* xq, int64_t nv, int terms, float* y, int64_t ldy) {
  for (int64_t t = tile_begin; t < tile_end; ++t) {
    if (terms == 2) {
      tile_rows_n<F, N, 2>(tiles, t, xq, nv, y, ldy);
    } else {
      tile_rows_n<F, N, 1>(tiles, t, xq, nv, y, ldy);
    }
  }
}

}  // namespace

void row_tiles_avx512_vnni(const RowTiles& tiles, const Q8Activations* xq, int64_t n, int terms,
                           float* y, int64_t ldy, int64_t tile_begin, int64_t tile_end) {
  with_tile_format(tiles, [&]<TileFormat F, Offset N>() {
    tiles_rows<F, N>(tiles, tile_begin, tile_end, xq, n, terms, y, ldy);
  });
}

}  // namespace duet::onednn::detail
