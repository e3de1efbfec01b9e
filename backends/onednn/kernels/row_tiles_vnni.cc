// The row-tile product (row_tiles.h) on AVX-512 VNNI.
//
// For one tile and up to kMaxVectors activation rows at a time: each block's
// eight 64-byte weight vectors are loaded once into registers and multiplied
// by every activation row, 4 activation bytes broadcast to all 16 lanes per
// vpdpbusd; the integer sums then take the block's scales with two f32
// multiply-adds per row (d * dx, and the offset m times dx * Σqx).
// Registers: 8 weight vectors, d, m, and two accumulators per activation row.

#include "kernels/avx512_intrinsics.h"

#include <cstdint>
#include <cstring>

#include "kernels/qgemv_paths.h"

namespace duet::onednn::detail {
namespace {

constexpr int kMaxVectors = 8;
constexpr int kVectorsPerBlock = RowTiles::kBlock / 4;  // weight vectors of a block
constexpr int64_t kScaleBytes = 2 * RowTiles::kRows * sizeof(float);

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

// Tile t against activation rows xq[0..NV), all of `Terms` terms.
template <int NV, int Terms>
void tile_rows(const RowTiles& tiles, int64_t t, const Q8Activations* xq, float* y, int64_t ldy) {
  const uint8_t* p = tiles.tile(t);
  __m512 acc[NV];
  __m512 acc_m[NV];
  for (int v = 0; v < NV; ++v) {
    acc[v] = _mm512_setzero_ps();
    acc_m[v] = _mm512_setzero_ps();
  }
  for (int64_t b = 0; b < tiles.blocks(); ++b, p += RowTiles::kBlockBytes) {
    const __m512 d = _mm512_load_ps(p);
    const __m512 m = _mm512_load_ps(p + 64);
    __m512i w[kVectorsPerBlock];
    for (int j = 0; j < kVectorsPerBlock; ++j) w[j] = _mm512_load_si512(p + kScaleBytes + 64 * j);
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      const int64_t at = b * RowTiles::kBlock;
      __m512i s = block_sum(w, xq[v].q() + at, _mm512_setzero_si512());
      // Two terms: 256 * Σ(u * qa) + Σ(u * qb), at most 32 * 255 * 127 *
      // 257 < 2^31.
      if constexpr (Terms == 2) s = block_sum(w, xq[v].q_lo() + at, _mm512_slli_epi32(s, 8));
      const float* sx = xq[v].scales() + 2 * b;
      acc[v] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(d, _mm512_set1_ps(sx[0])),
                               acc[v]);
      acc_m[v] = _mm512_fmadd_ps(m, _mm512_set1_ps(sx[1]), acc_m[v]);
    }
  }
  const int64_t first = t * RowTiles::kRows;
  const int64_t valid = tiles.rows() - first < RowTiles::kRows ? tiles.rows() - first
                                                               : RowTiles::kRows;
  const auto mask = static_cast<__mmask16>((uint32_t{1} << valid) - 1);
  for (int v = 0; v < NV; ++v) {
    _mm512_mask_storeu_ps(y + v * ldy + first, mask, _mm512_add_ps(acc[v], acc_m[v]));
  }
}

template <int Terms>
void tile_rows_n(const RowTiles& tiles, int64_t t, const Q8Activations* xq, int64_t nv, float* y,
                 int64_t ldy) {
  switch (nv) {
    case 1:
      return tile_rows<1, Terms>(tiles, t, xq, y, ldy);
    case 2:
      return tile_rows<2, Terms>(tiles, t, xq, y, ldy);
    case 3:
      return tile_rows<3, Terms>(tiles, t, xq, y, ldy);
    case 4:
      return tile_rows<4, Terms>(tiles, t, xq, y, ldy);
    case 5:
      return tile_rows<5, Terms>(tiles, t, xq, y, ldy);
    case 6:
      return tile_rows<6, Terms>(tiles, t, xq, y, ldy);
    case 7:
      return tile_rows<7, Terms>(tiles, t, xq, y, ldy);
    default:
      return tile_rows<kMaxVectors, Terms>(tiles, t, xq, y, ldy);
  }
}

}  // namespace

void row_tiles_avx512_vnni(const RowTiles& tiles, const Q8Activations* xq, int64_t n, float* y,
                           int64_t ldy, int64_t tile_begin, int64_t tile_end) {
  // Runs of rows with one number of terms, in passes of at most kMaxVectors
  // whose sizes differ by at most one; each pass over all the tiles, so that
  // its activations stay in L1 while the tiles (a few of them per call, see
  // Matmul) come from L2.
  for (int64_t v = 0; v < n;) {
    const int terms = xq[v].terms();
    int64_t end = v + 1;
    while (end < n && xq[end].terms() == terms) ++end;
    const int64_t count = end - v;
    const int64_t passes = (count + kMaxVectors - 1) / kMaxVectors;
    for (int64_t pass = 0; pass < passes; ++pass) {
      const int64_t nv = count / passes + (pass < count % passes ? 1 : 0);
      for (int64_t t = tile_begin; t < tile_end; ++t) {
        if (terms == 2) {
          tile_rows_n<2>(tiles, t, xq + v, nv, y + v * ldy, ldy);
        } else {
          tile_rows_n<1>(tiles, t, xq + v, nv, y + v * ldy, ldy);
        }
      }
      v += nv;
    }
  }
}

}  // namespace duet::onednn::detail
