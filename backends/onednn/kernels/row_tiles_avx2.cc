// The row-tile product (row_tiles.h) for nibble tiles (q4_0, q4_1, and
// q4_k's super-nibbles) and q8_0's byte tiles on the AVX2 path.
//
// vpmaddubsw multiplies unsigned by signed bytes into 16-bit sums of pairs,
// saturating; with nibbles (u ≤ 15) and activations |q| ≤ 127 a whole
// block's eight products per lane stay below 2^15 (16 × 15 × 127 = 30,480),
// so they are added in 16 bits and widened once (vpmaddwd by ones). Byte
// tiles' u = w + 128 (up to 255) would saturate a pair, so they are turned
// back into the signed w and multiplied as |w| by the activation with w's
// sign (vpsignb), at most 2 × 128 × 127 < 2^15 a pair, each pair sum
// widened at once.
//
// A 256-bit register holds 8 rows' 4-byte groups: a tile is taken as two
// halves of 8 rows, each against up to kMaxVectors activation rows with
// the block's 8 weight vectors in registers.

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/prefetch.h"
#include "kernels/qgemv_paths.h"

namespace duet::onednn::detail {
namespace {

// 8 weight vectors + 4 accumulators + scales: the 16 registers.
constexpr int kMaxVectors = kRowTilesMaxVectorsAvx2;
constexpr int kVectorsPerBlock = RowTiles::kBlock / 4;
constexpr int kHalfRows = RowTiles::kRows / 2;

__m256i broadcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof v);
  return _mm256_set1_epi32(v);
}

// Σ over the block of u * x per 32-bit lane (row): 16-bit pair sums added
// up (at most 30,480), then widened.
__m256i block_sum(const __m256i* w, const int8_t* x) {
  __m256i s16 = _mm256_maddubs_epi16(w[0], broadcast4(x));
#pragma GCC unroll 8
  for (int j = 1; j < kVectorsPerBlock; ++j) {
    s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(w[j], broadcast4(x + 4 * j)));
  }
  return _mm256_madd_epi16(s16, _mm256_set1_epi16(1));
}

// Half h's 8 rows of one block: their scales and the 8 weight vectors whose
// vector j pairs with activation bytes 4j..4j+3.
struct HalfBlock {
  __m256 d;
  __m256 m;
  __m256i w[kVectorsPerBlock];
};

// A kNibbles block at p: f16 d[16], m[16], then 4 vectors of 64 bytes (rows
// 0..15, 4 bytes each); q4_0 (kQ4_0) has m = -8d.
template <bool kQ4_0>
HalfBlock load_nibbles(const uint8_t* p, int h) {
  HalfBlock blk;
  blk.d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * kHalfRows * h)));
  blk.m = kQ4_0 ? _mm256_mul_ps(blk.d, _mm256_set1_ps(-8.0f))
                : _mm256_cvtph_ps(_mm_loadu_si128(
                      reinterpret_cast<const __m128i*>(p + 32 + 2 * kHalfRows * h)));
  const __m256i nibble = _mm256_set1_epi8(0x0f);
  for (int j = 0; j < kVectorsPerBlock / 2; ++j) {
    const __m256i q =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 64 + 64 * j + 32 * h));
    blk.w[j] = _mm256_and_si256(q, nibble);
    blk.w[kVectorsPerBlock / 2 + j] = _mm256_and_si256(_mm256_srli_epi16(q, 4), nibble);
  }
  return blk;
}

// Block b of the kSuperNibbles tile at `tile` (row_tiles.h): d = super d *
// scale, m = -(super dmin * min), exact in f32 as on the VNNI path.
HalfBlock load_super_nibbles(const uint8_t* tile, int64_t b, int h) {
  constexpr int kRows = RowTiles::kRows;
  const int64_t s = b % RowTiles::kSubBlocks;
  const uint8_t* p = RowTiles::super_block(tile, b);
  auto bytes_as_floats = [](const uint8_t* q) {
    return _mm256_cvtepi32_ps(
        _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q))));
  };
  auto f16_as_floats = [](const uint8_t* q) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q)));
  };
  const int64_t rows = s * kRows + kHalfRows * h;  // this half's rows of sub-block s
  HalfBlock blk;
  blk.d = _mm256_mul_ps(f16_as_floats(p + 2 * kHalfRows * h),
                        bytes_as_floats(p + RowTiles::kSuperScalesAt + rows));
  const __m256 dm = _mm256_mul_ps(f16_as_floats(p + 32 + 2 * kHalfRows * h),
                                  bytes_as_floats(p + RowTiles::kSuperMinsAt + rows));
  blk.m = _mm256_xor_ps(dm, _mm256_set1_ps(-0.0f));  // -(dmin * min), the sign flipped
  const uint8_t* q = RowTiles::super_nibbles(tile, b) + 32 * h;
  const __m256i nibble = _mm256_set1_epi8(0x0f);
  for (int j = 0; j < kVectorsPerBlock; ++j) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 64 * j));
    blk.w[j] = _mm256_and_si256(s % 2 == 0 ? v : _mm256_srli_epi16(v, 4), nibble);
  }
  return blk;
}

// Writes acc[v], rows [8h, 8h + 8) of tile t, to row v of y (ldy floats
// apart), leaving out rows past the matrix's last.
template <int NV>
void store_half(const RowTiles& tiles, int64_t t, int h, const __m256 (&acc)[NV], float* y,
                int64_t ldy) {
  const int64_t first = t * RowTiles::kRows + kHalfRows * h;
  const int64_t valid = tiles.rows() - first;
  for (int v = 0; v < NV; ++v) {
    if (valid >= kHalfRows) {
      _mm256_storeu_ps(y + v * ldy + first, acc[v]);
    } else if (valid > 0) {
      alignas(32) float out[kHalfRows];
      _mm256_store_ps(out, acc[v]);
      std::memcpy(y + v * ldy + first, out, static_cast<size_t>(valid) * sizeof(float));
    }
  }
}

// Rows [8h, 8h + 8) of tile t against activation rows xq[0..NV).
template <TileFormat F, bool kQ4_0, int NV, int Terms>
void half_rows(const RowTiles& tiles, int64_t t, int h, const Q8Activations* xq, float* y,
               int64_t ldy) {
  const uint8_t* const tile = tiles.tile(t);  // once: block_bytes() is out of line
  const uint8_t* p = tile;
  const int64_t block_bytes = tiles.block_bytes();
  __m256 acc[NV];
  for (int v = 0; v < NV; ++v) acc[v] = _mm256_setzero_ps();
  for (int64_t b = 0; b < tiles.blocks(); ++b, p += block_bytes) {
    // The first half's pass brings the tile in; the second reads it from L1.
    if (h == 0) prefetch_stream(p, block_bytes);
    HalfBlock blk;
    if constexpr (F == TileFormat::kSuperNibbles) {
      blk = load_super_nibbles(tile, b, h);
    } else {
      blk = load_nibbles<kQ4_0>(p, h);
    }
    const __m256 d = blk.d;
    const __m256 m = blk.m;
    const __m256i* w = blk.w;
    for (int v = 0; v < NV; ++v) {
      const int64_t at = b * RowTiles::kBlock;
      __m256i s = block_sum(w, xq[v].q() + at);
      // Two terms: 256 * Σ(u * qa) + Σ(u * qb), far below 2^31 for nibbles.
      if constexpr (Terms == 2) {
        s = _mm256_add_epi32(_mm256_slli_epi32(s, 8), block_sum(w, xq[v].q_lo() + at));
      }
      const float* sx = xq[v].scales() + 2 * b;
      acc[v] =
          _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(d, _mm256_set1_ps(sx[0])), acc[v]);
      acc[v] = _mm256_fmadd_ps(m, _mm256_set1_ps(sx[1]), acc[v]);
    }
  }
  store_half(tiles, t, h, acc, y, ldy);
}

// Rows [8h, 8h + 8) of q8_0 tile t (kBytes: f32 d[16], then 8 vectors of
// 64 bytes, vector j holding u = w + 128 of elements 4j..4j+3 of rows
// 0..15, 4 bytes each) against activation rows xq[0..NV): Σ(w * x) per
// block in int32 (two terms: 256 * Σ(w * qa) + Σ(w * qb), at most
// 256 * 32 * 128 * 127 + ... < 2^31), scaled by d and the row's unit.
template <int NV, int Terms>
void half_rows_bytes(const RowTiles& tiles, int64_t t, int h, const Q8Activations* xq, float* y,
                     int64_t ldy) {
  const uint8_t* p = tiles.tile(t);
  const int64_t block_bytes = tiles.block_bytes();
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  __m256 acc[NV];
  for (int v = 0; v < NV; ++v) acc[v] = _mm256_setzero_ps();
  for (int64_t b = 0; b < tiles.blocks(); ++b, p += block_bytes) {
    if (h == 0) prefetch_stream(p, block_bytes);
    const int64_t at = b * RowTiles::kBlock;
    __m256i sums[NV];
    for (int v = 0; v < NV; ++v) sums[v] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int j = 0; j < kVectorsPerBlock; ++j) {
      const __m256i w = _mm256_xor_si256(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 64 + 64 * j + 32 * h)), flip);
      const __m256i w_abs = _mm256_abs_epi8(w);
      for (int v = 0; v < NV; ++v) {
        auto dot = [&](const int8_t* x) {
          return _mm256_madd_epi16(_mm256_maddubs_epi16(w_abs, _mm256_sign_epi8(broadcast4(x), w)),
                                   ones);
        };
        __m256i s = dot(xq[v].q() + at + 4 * j);
        if constexpr (Terms == 2) {
          s = _mm256_add_epi32(_mm256_slli_epi32(s, 8), dot(xq[v].q_lo() + at + 4 * j));
        }
        sums[v] = _mm256_add_epi32(sums[v], s);
      }
    }
    const __m256 d = _mm256_loadu_ps(reinterpret_cast<const float*>(p) + kHalfRows * h);
    for (int v = 0; v < NV; ++v) {
      const float unit = xq[v].scales()[2 * b];
      acc[v] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums[v]), _mm256_mul_ps(d, _mm256_set1_ps(unit)),
                               acc[v]);
    }
  }
  store_half(tiles, t, h, acc, y, ldy);
}

// Half h of tile t against NV activation rows, by format.
template <TileFormat F, bool kQ4_0, int NV, int Terms>
void half_tile(const RowTiles& tiles, int64_t t, int h, const Q8Activations* xq, float* y,
               int64_t ldy) {
  if constexpr (F == TileFormat::kBytes) {
    half_rows_bytes<NV, Terms>(tiles, t, h, xq, y, ldy);
  } else {
    half_rows<F, kQ4_0, NV, Terms>(tiles, t, h, xq, y, ldy);
  }
}

template <TileFormat F, bool kQ4_0, int Terms>
void tile_rows_n(const RowTiles& tiles, int64_t t, const Q8Activations* xq, int64_t nv, float* y,
                 int64_t ldy) {
  for (int h = 0; h < 2; ++h) {
    switch (nv) {
      case 1:
        half_tile<F, kQ4_0, 1, Terms>(tiles, t, h, xq, y, ldy);
        break;
      case 2:
        half_tile<F, kQ4_0, 2, Terms>(tiles, t, h, xq, y, ldy);
        break;
      case 3:
        half_tile<F, kQ4_0, 3, Terms>(tiles, t, h, xq, y, ldy);
        break;
      default:
        half_tile<F, kQ4_0, kMaxVectors, Terms>(tiles, t, h, xq, y, ldy);
        break;
    }
  }
}

template <TileFormat F, bool kQ4_0>
void tiles_rows(const RowTiles& tiles, const Q8Activations* xq, int64_t n, int terms, float* y,
                int64_t ldy, int64_t tile_begin, int64_t tile_end) {
  for (int64_t t = tile_begin; t < tile_end; ++t) {
    if (terms == 2) {
      tile_rows_n<F, kQ4_0, 2>(tiles, t, xq, n, y, ldy);
    } else {
      tile_rows_n<F, kQ4_0, 1>(tiles, t, xq, n, y, ldy);
    }
  }
}

}  // namespace

void row_tiles_avx2(const RowTiles& tiles, const Q8Activations* xq, int64_t n, int terms, float* y,
                    int64_t ldy, int64_t tile_begin, int64_t tile_end) {
  if (tiles.format() == TileFormat::kSuperNibbles) {
    tiles_rows<TileFormat::kSuperNibbles, false>(tiles, xq, n, terms, y, ldy, tile_begin, tile_end);
  } else if (tiles.format() == TileFormat::kBytes) {
    tiles_rows<TileFormat::kBytes, false>(tiles, xq, n, terms, y, ldy, tile_begin, tile_end);
  } else if (tiles.type() == DType::kQ4_0) {
    tiles_rows<TileFormat::kNibbles, true>(tiles, xq, n, terms, y, ldy, tile_begin, tile_end);
  } else {
    tiles_rows<TileFormat::kNibbles, false>(tiles, xq, n, terms, y, ldy, tile_begin, tile_end);
  }
}

}  // namespace duet::onednn::detail
