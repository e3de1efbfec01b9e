// The row-tile product (row_tiles.h) for nibble tiles (q4_0, q4_1, and
// q4_k's super-nibbles), fifth-bit tiles (q5_0, q5_1) and q8_0's byte
// tiles on the AVX2 path.
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
// up, then widened — all 8 vectors' for nibbles (at most 16 × 15 × 127 =
// 30,480), 4 at a time for five bits (u ≤ 31: 8 × 31 × 127 = 31,496).
template <TileFormat F>
__m256i block_sum(const __m256i* w, const int8_t* x) {
  constexpr int kRun = F == TileFormat::kFiveBits ? kVectorsPerBlock / 2 : kVectorsPerBlock;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i sum = _mm256_setzero_si256();
  for (int j0 = 0; j0 < kVectorsPerBlock; j0 += kRun) {
    __m256i s16 = _mm256_maddubs_epi16(w[j0], broadcast4(x + 4 * j0));
#pragma GCC unroll 8
    for (int j = j0 + 1; j < j0 + kRun; ++j) {
      s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(w[j], broadcast4(x + 4 * j)));
    }
    sum = _mm256_add_epi32(sum, _mm256_madd_epi16(s16, ones));
  }
  return sum;
}

// Half h's 8 rows of one block: their scales and the 8 weight vectors whose
// vector j pairs with activation bytes 4j..4j+3.
struct HalfBlock {
  __m256 d;
  __m256 m;
  __m256i w[kVectorsPerBlock];
};

// A kNibbles block at p: f16 d[16], m[16], then 4 vectors of 64 bytes (rows
// 0..15, 4 bytes each); kFiveBits, then a vector of fifth bits, bit J of
// each byte joining w[J] (row_tiles.h). m = kM * d where kM ≠ 0 (q4_0 -8,
// q5_0 -16), else stored.
template <TileFormat F, int kM>
[[gnu::always_inline]] inline HalfBlock load_nibbles(const uint8_t* p, int h) {
  HalfBlock blk;
  blk.d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * kHalfRows * h)));
  blk.m = kM != 0 ? _mm256_mul_ps(blk.d, _mm256_set1_ps(static_cast<float>(kM)))
                  : _mm256_cvtph_ps(_mm_loadu_si128(
                        reinterpret_cast<const __m128i*>(p + 32 + 2 * kHalfRows * h)));
  const __m256i nibble = _mm256_set1_epi8(0x0f);
  for (int j = 0; j < kVectorsPerBlock / 2; ++j) {
    const __m256i q =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 64 + 64 * j + 32 * h));
    blk.w[j] = _mm256_and_si256(q, nibble);
    blk.w[kVectorsPerBlock / 2 + j] = _mm256_and_si256(_mm256_srli_epi16(q, 4), nibble);
  }
  if constexpr (F == TileFormat::kFiveBits) {
    const __m256i bits = _mm256_loadu_si256(
        reinterpret_cast<const __m256i*>(p + 64 + 64 * kVectorsPerBlock / 2 + 32 * h));
    const __m256i fifth = _mm256_set1_epi8(0x10);
    // Bit J of each byte to bit 4: shifts of 16-bit lanes, whose bytes'
    // bits 4 never come from the other byte.
    blk.w[0] = _mm256_or_si256(blk.w[0], _mm256_and_si256(_mm256_slli_epi16(bits, 4), fifth));
    blk.w[1] = _mm256_or_si256(blk.w[1], _mm256_and_si256(_mm256_slli_epi16(bits, 3), fifth));
    blk.w[2] = _mm256_or_si256(blk.w[2], _mm256_and_si256(_mm256_slli_epi16(bits, 2), fifth));
    blk.w[3] = _mm256_or_si256(blk.w[3], _mm256_and_si256(_mm256_slli_epi16(bits, 1), fifth));
    blk.w[4] = _mm256_or_si256(blk.w[4], _mm256_and_si256(bits, fifth));
    blk.w[5] = _mm256_or_si256(blk.w[5], _mm256_and_si256(_mm256_srli_epi16(bits, 1), fifth));
    blk.w[6] = _mm256_or_si256(blk.w[6], _mm256_and_si256(_mm256_srli_epi16(bits, 2), fifth));
    blk.w[7] = _mm256_or_si256(blk.w[7], _mm256_and_si256(_mm256_srli_epi16(bits, 3), fifth));
  }
  return blk;
}

// Block b of the kSuperNibbles tile at `tile` (row_tiles.h): d = super d *
// scale, m = -(super dmin * min), exact in f32 as on the VNNI path.
[[gnu::always_inline]] inline HalfBlock load_super_nibbles(const uint8_t* tile, int64_t b, int h) {
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
template <TileFormat F, int kM, int NV, int Terms>
void half_rows(const RowTiles& tiles, int64_t t, int h, const Q8Activations* xq, float* y,
               int64_t ldy) {
  const uint8_t* const tile = tiles.tile(t);  // once: block_bytes() is out of line
  const uint8_t* p = tile;
  const int64_t block_bytes = tiles.block_bytes();
  __m256 acc[NV];
  for (int v = 0; v < NV; ++v) acc[v] = _mm256_setzero_ps();
  for (int64_t b = 0; b < tiles.blocks(); ++b, p += block_bytes) {
    // The first half's pass brings the tile in; the second reads it from L1,
    // or from L2 where the tile outgrows L1 (long rows).
    if (h == 0) prefetch_stream(p, block_bytes);
    HalfBlock blk;
    if constexpr (F == TileFormat::kSuperNibbles) {
      blk = load_super_nibbles(tile, b, h);
    } else {
      blk = load_nibbles<F, kM>(p, h);
    }
    const __m256 d = blk.d;
    const __m256 m = blk.m;
    const __m256i* w = blk.w;
    for (int v = 0; v < NV; ++v) {
      const int64_t at = b * RowTiles::kBlock;
      __m256i s = block_sum<F>(w, xq[v].q() + at);
      // Two terms: 256 * Σ(u * qa) + Σ(u * qb), far below 2^31 for u ≤ 31.
      if constexpr (Terms == 2) {
        s = _mm256_add_epi32(_mm256_slli_epi32(s, 8), block_sum<F>(w, xq[v].q_lo() + at));
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
    if (h == 0) prefetch_stream(p, block_bytes);  // as half_rows'
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
template <TileFormat F, int kM, int NV, int Terms>
void half_tile(const RowTiles& tiles, int64_t t, int h, const Q8Activations* xq, float* y,
               int64_t ldy) {
  if constexpr (F == TileFormat::kBytes) {
    half_rows_bytes<NV, Terms>(tiles, t, h, xq, y, ldy);
  } else {
    half_rows<F, kM, NV, Terms>(tiles, t, h, xq, y, ldy);
  }
}

template <TileFormat F, int kM, int Terms>
void tile_rows_n(const RowTiles& tiles, int64_t t, const Q8Activations* xq, int64_t nv, float* y,
                 int64_t ldy) {
  for (int h = 0; h < 2; ++h) {
    switch (nv) {
      case 1:
        half_tile<F, kM, 1, Terms>(tiles, t, h, xq, y, ldy);
        break;
      case 2:
        half_tile<F, kM, 2, Terms>(tiles, t, h, xq, y, ldy);
        break;
      case 3:
        half_tile<F, kM, 3, Terms>(tiles, t, h, xq, y, ldy);
        break;
      default:
        half_tile<F, kM, kMaxVectors, Terms>(tiles, t, h, xq, y, ldy);
        break;
    }
  }
}

template <TileFormat F, int kM>
void tiles_rows(const RowTiles& tiles, const Q8Activations* xq, int64_t n, int terms, float* y,
                int64_t ldy, int64_t tile_begin, int64_t tile_end) {
  for (int64_t t = tile_begin; t < tile_end; ++t) {
    if (terms == 2) {
      tile_rows_n<F, kM, 2>(tiles, t, xq, n, y, ldy);
    } else {
      tile_rows_n<F, kM, 1>(tiles, t, xq, n, y, ldy);
    }
  }
}

}  // namespace

void row_tiles_avx2(const RowTiles& tiles, const Q8Activations* xq, int64_t n, int terms, float* y,
                    int64_t ldy, int64_t tile_begin, int64_t tile_end) {
  auto run = [&]<TileFormat F, int kM>() {
    tiles_rows<F, kM>(tiles, xq, n, terms, y, ldy, tile_begin, tile_end);
  };
  switch (tiles.format()) {
    case TileFormat::kSuperNibbles:
      return run.template operator()<TileFormat::kSuperNibbles, 0>();
    case TileFormat::kBytes:
      return run.template operator()<TileFormat::kBytes, 0>();
    case TileFormat::kFiveBits:
      if (tiles.type() == DType::kQ5_0)
        return run.template operator()<TileFormat::kFiveBits, -16>();
      return run.template operator()<TileFormat::kFiveBits, 0>();
    default:
      if (tiles.type() == DType::kQ4_0) return run.template operator()<TileFormat::kNibbles, -8>();
      return run.template operator()<TileFormat::kNibbles, 0>();
  }
}

}  // namespace duet::onednn::detail
