// AVX-512 halves of decode attention; see attend_avx512.h.
#include "kernels/attend_avx512.h"

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "duet/block_formats.h"
#include "kernels/attend_blocks.h"
#include "kernels/avx512_intrinsics.h"
#include "kernels/kv_tiles.h"
#include "kernels/reduce16_avx512.h"
#include "kernels/with_heads.h"
#include "vector_kernels.h"

namespace duet::onednn::detail {
namespace {

constexpr int64_t kBlock = 16;  // positions per block: one score vector

// The q8_0 cache rows' blocks (duet/block_formats.h): 32 values each.
using duet::blocks::BlockQ8_0;
constexpr int64_t kQ8Bytes = sizeof(BlockQ8_0);
constexpr int64_t kQ8Quants = offsetof(BlockQ8_0, qs);

// Values [c, c + 16) of a cache row of f32 or f16 elements (q8_0 rows are
// read a block at a time: q8_block below).
template <DType T>
__m512 load16(const uint8_t* row, int64_t c) {
  static_assert(T == DType::kF32 || T == DType::kF16);
  if constexpr (T == DType::kF16) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * c)));
  } else {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + c);
  }
}

// The 32 values of the q8_0 block at `block`, as two vectors.
__attribute__((always_inline)) inline void q8_block(const uint8_t* block, __m512* lo, __m512* hi) {
  uint16_t h;
  std::memcpy(&h, block + offsetof(BlockQ8_0, d), sizeof h);
  const __m512 d = _mm512_set1_ps(_cvtsh_ss(h));
  const auto* qs = reinterpret_cast<const __m128i*>(block + kQ8Quants);
  *lo = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(qs))), d);
  *hi = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(qs + 1))), d);
}

// acc[h][c0..c0+16·C) += Σ_i p[h][i] * v_i[c0..c0+16·C) for H heads over
// the m positions of one block of f32 or f16 values: each position's C·16
// values are widened once into registers and feed C·H accumulators, enough
// independent FMA chains that the FMA latency does not bind. REQUIRES m ≥ 1
// (a loop that runs at least once: GCC otherwise keeps the accumulators in
// memory around it, ~25% of a tile's time in attend_bench).
template <DType T, int H, int C>
void values_chunks(const uint8_t* v, int64_t stride_bytes, int64_t m, int32_t head_dim, int64_t c0,
                   const float* probs, int64_t n, float* acc) {
  __m512 a[H][C];
  for (int h = 0; h < H; ++h) {
    for (int u = 0; u < C; ++u) a[h][u] = _mm512_loadu_ps(acc + h * head_dim + c0 + 16 * u);
  }
  for (int64_t i = 0; i < std::max<int64_t>(m, 1); ++i) {
    __m512 x[C];
    for (int u = 0; u < C; ++u) x[u] = load16<T>(v + i * stride_bytes, c0 + 16 * u);
    for (int h = 0; h < H; ++h) {
      const __m512 p = _mm512_set1_ps(probs[h * n + i]);
      for (int u = 0; u < C; ++u) a[h][u] = _mm512_fmadd_ps(p, x[u], a[h][u]);
    }
  }
  for (int h = 0; h < H; ++h) {
    for (int u = 0; u < C; ++u) _mm512_storeu_ps(acc + h * head_dim + c0 + 16 * u, a[h][u]);
  }
}

// values_chunks over all of head_dim: 64 dimensions at a time, then the
// rest (16, 32 or 48), with the number of vectors fixed at compile time.
template <DType T, int H>
void values_heads(const uint8_t* v, int64_t stride_bytes, int64_t m, int32_t head_dim,
                  const float* probs, int64_t n, float* acc) {
  int64_t c0 = 0;
  for (; c0 + 64 <= head_dim; c0 += 64) {
    values_chunks<T, H, 4>(v, stride_bytes, m, head_dim, c0, probs, n, acc);
  }
  switch ((head_dim - c0) / 16) {
    case 3:
      return values_chunks<T, H, 3>(v, stride_bytes, m, head_dim, c0, probs, n, acc);
    case 2:
      return values_chunks<T, H, 2>(v, stride_bytes, m, head_dim, c0, probs, n, acc);
    case 1:
      return values_chunks<T, H, 1>(v, stride_bytes, m, head_dim, c0, probs, n, acc);
    default:
      return;
  }
}

// acc[h][c0..c0+32·blocks) += Σ_i w[h][b][i] * q_i[b] for H heads over the
// m positions of one block, q_i[b] the int8 values of q8_0 block c0/32 + b
// of position i and w[h][b][i] its probability times the block's scale —
// the scales folded into the probabilities once per block of positions
// (16 lanes at a time), so each value is only widened, never scaled.
template <int H>
void values_heads_q8(const uint8_t* v, int64_t stride_bytes, int64_t m, int64_t c0, int blocks,
                     const float (*w)[2][kBlock], int32_t head_dim, float* acc) {
  __m512 a[H][4];
  const int chunks = 2 * blocks;
  for (int h = 0; h < H; ++h) {
    for (int u = 0; u < 4; ++u) {
      if (u < chunks) a[h][u] = _mm512_loadu_ps(acc + h * head_dim + c0 + 16 * u);
    }
  }
  const uint8_t* row = v + c0 / duet::blocks::kQK * kQ8Bytes + kQ8Quants;
  for (int64_t i = 0; i < m; ++i, row += stride_bytes) {
    __m512 x[4];
    for (int u = 0; u < 4; ++u) {
      if (u < chunks) {
        const auto* qs = reinterpret_cast<const __m128i*>(row + u / 2 * kQ8Bytes + u % 2 * 16);
        x[u] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(qs)));
      }
    }
    for (int h = 0; h < H; ++h) {
      for (int b = 0; b < 2; ++b) {
        if (b >= blocks) continue;
        const __m512 p = _mm512_set1_ps(w[h][b][i]);
        a[h][2 * b] = _mm512_fmadd_ps(p, x[2 * b], a[h][2 * b]);
        a[h][2 * b + 1] = _mm512_fmadd_ps(p, x[2 * b + 1], a[h][2 * b + 1]);
      }
    }
  }
  for (int h = 0; h < H; ++h) {
    for (int u = 0; u < 4; ++u) {
      if (u < chunks) _mm512_storeu_ps(acc + h * head_dim + c0 + 16 * u, a[h][u]);
    }
  }
}

// values_typed's step for q8_0: H heads (head h's probabilities of the
// block at probs + h * n, its accumulators at acc + h * head_dim) over the
// m ≤ 16 positions of one block of one KV head's values, 64 dimensions at
// a time.
template <int H>
void values_block_q8(const uint8_t* values, int64_t stride_bytes, int64_t m, int32_t head_dim,
                     const float* probs, int64_t n, float* acc) {
  const auto present = static_cast<__mmask16>((1u << m) - 1);
  const __m512i rows =
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_epi32(static_cast<int32_t>(stride_bytes)));
  __m512 p[H];
  for (int h = 0; h < H; ++h) p[h] = _mm512_maskz_loadu_ps(present, probs + h * n);
  for (int64_t c0 = 0; c0 < head_dim; c0 += 64) {
    const int blocks = head_dim - c0 >= 64 ? 2 : 1;
    float w[H][2][kBlock];
    for (int b = 0; b < blocks; ++b) {
      // Four bytes at each position's block start: the low two are its f16 scale.
      const __m512i words =
          _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), present, rows,
                                      values + (c0 / duet::blocks::kQK + b) * kQ8Bytes, 1);
      const __m512 d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(words));
      for (int h = 0; h < H; ++h) _mm512_storeu_ps(w[h][b], _mm512_mul_ps(p[h], d));
    }
    values_heads_q8<H>(values, stride_bytes, m, c0, blocks, w, head_dim, acc);
  }
}

// The scale-free scores of 16 (or, unless kFull, m < 16) keys against
// query head qh: lane j is qh · key j, dimensions c..c+15 of key j the 16
// floats at keys + j * row_step + c / 16 * chunk_step (rows of an f32 cache
// in place: row_step its stride, chunk_step 16; widen_keys' staging: 16 and
// 256, constants once inlined, so every load is one base plus an offset).
// The positions are unrolled so that their 16 sums stay in registers.
template <bool kFull>
__attribute__((always_inline)) inline __m512 dots16(const float* keys, int64_t row_step,
                                                    int64_t chunk_step, int64_t m, const float* qh,
                                                    int32_t head_dim) {
  __m512 part[kBlock];
  for (int64_t j = 0; j < kBlock; ++j) part[j] = _mm512_setzero_ps();
  for (int64_t c = 0; c < head_dim; c += 16, keys += chunk_step) {
    const __m512 qc = _mm512_loadu_ps(qh + c);
#pragma GCC unroll 16
    for (int64_t j = 0; j < kBlock; ++j) {
      if (kFull || j < m)
        part[j] = _mm512_fmadd_ps(_mm512_loadu_ps(keys + j * row_step), qc, part[j]);
    }
  }
  return sum16(part);
}

// Rows j < m of head_dim `T` elements at keys + j * stride_bytes, widened
// to f32 at out by 16 dimensions: dimensions c..c+15 of
// row j at out + 16 * (c + j) (q8_0: one scale per 32 elements).
template <DType T>
void widen_keys(const uint8_t* keys, int64_t stride_bytes, int64_t m, int32_t head_dim,
                float* out) {
  for (int64_t j = 0; j < m; ++j) {
    const uint8_t* row = keys + j * stride_bytes;
    float* o = out + 16 * j;
    if constexpr (T == DType::kQ8_0) {
      for (int64_t c = 0; c < head_dim; c += duet::blocks::kQK, row += kQ8Bytes) {
        __m512 lo, hi;
        q8_block(row, &lo, &hi);
        _mm512_storeu_ps(o + 16 * c, lo);
        _mm512_storeu_ps(o + 16 * (c + 16), hi);
      }
    } else {
      for (int64_t c = 0; c < head_dim; c += 16) _mm512_storeu_ps(o + 16 * c, load16<T>(row, c));
    }
  }
}

// The scores of one block of m ≤ 16 positions (keys at block, rows
// stride_bytes apart) for every query head: scores[h * n + j] for j < m.
template <DType T>
void scores_block(const float* q, int32_t kv_heads, int32_t group, int32_t head_dim, float scale,
                  const uint8_t* block, int64_t stride_bytes, int64_t m, float* scores, int64_t n,
                  float* staging) {
  const int64_t head_bytes = cache_head_bytes(T, head_dim);
  const __m512 vscale = _mm512_set1_ps(scale);
  const auto lanes = static_cast<__mmask16>((1u << m) - 1);
  for (int64_t g = 0; g < kv_heads; ++g) {
    const uint8_t* keys = block + g * head_bytes;
    // The keys: an f32 cache's in place, others widened once into `staging`
    // for all query heads of the group.
    const float* rows = reinterpret_cast<const float*>(keys);
    int64_t row_step = stride_bytes / 4, chunk_step = 16;
    if constexpr (T != DType::kF32) {
      widen_keys<T>(keys, stride_bytes, m, head_dim, staging);
      rows = staging;
      row_step = 16;
      chunk_step = 16 * kBlock;
    }
    for (int64_t h = g * group; h < (g + 1) * group; ++h) {
      const float* qh = q + h * head_dim;
      const __m512 dots = m == kBlock ? dots16<true>(rows, row_step, chunk_step, m, qh, head_dim)
                                      : dots16<false>(rows, row_step, chunk_step, m, qh, head_dim);
      _mm512_mask_storeu_ps(scores + h * n, lanes, _mm512_mul_ps(dots, vscale));
    }
  }
}

template <DType T>
void scores_typed(const float* q, int32_t kv_heads, int32_t group, int32_t head_dim, float scale,
                  const void* k, int64_t stride_bytes, int64_t n, float* scores, float* staging) {
  const int64_t head_bytes = cache_head_bytes(T, head_dim);
  for_each_block<kBlock>(static_cast<const uint8_t*>(k), n, stride_bytes, kv_heads * head_bytes,
                         [&](const uint8_t* block, int64_t i0, int64_t m) {
                           scores_block<T>(q, kv_heads, group, head_dim, scale, block, stride_bytes,
                                           m, scores + i0, n, staging);
                         });
}

template <DType T>
void values_typed(int32_t kv_heads, int32_t group, int32_t head_dim, const void* v,
                  int64_t stride_bytes, int64_t n, const float* probs, float* acc) {
  const int64_t head_bytes = cache_head_bytes(T, head_dim);
  for_each_block<kBlock>(
      static_cast<const uint8_t*>(v), n, stride_bytes, kv_heads * head_bytes,
      [&](const uint8_t* block, int64_t i0, int64_t m) {
        for (int64_t g = 0; g < kv_heads; ++g) {
          const uint8_t* values = block + g * head_bytes;
          // Heads four at a time: four accumulators per 16 dimensions stay in registers.
          for (int64_t h = g * group; h < (g + 1) * group; h += 4) {
            const float* p = probs + h * n + i0;
            float* a = acc + h * head_dim;
            with_heads<4>(std::min<int64_t>(4, (g + 1) * group - h), [&]<int H>() {
              if constexpr (T == DType::kQ8_0) {
                values_block_q8<H>(values, stride_bytes, m, head_dim, p, n, a);
              } else {
                values_heads<T, H>(values, stride_bytes, m, head_dim, p, n, a);
              }
            });
          }
        }
      });
}

// The scale-free scores of a tile's 16 slots against H query heads (head
// h at q + h * head_dim) from one KV head's keys of an f16 tile
// (kernels/kv_tiles.h: element d of the 16 slots at keys + 32 * d): lane j
// of s[h] is q_h · key j. Two accumulators per head (even and odd d), so
// that 2H independent FMA chains hide the latency.
template <int H>
__attribute__((always_inline)) inline void tile_dots_f16(const uint8_t* keys, const float* q,
                                                         int32_t head_dim, __m512 (&s)[H]) {
  __m512 a[H][2];
  for (int h = 0; h < H; ++h) a[h][0] = a[h][1] = _mm512_setzero_ps();
  for (int64_t d = 0; d < head_dim; d += 2) {
    const __m512 k0 =
        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(keys + 32 * d)));
    const __m512 k1 =
        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(keys + 32 * d + 32)));
#pragma GCC unroll 4
    for (int h = 0; h < H; ++h) {
      a[h][0] = _mm512_fmadd_ps(_mm512_set1_ps(q[h * head_dim + d]), k0, a[h][0]);
      a[h][1] = _mm512_fmadd_ps(_mm512_set1_ps(q[h * head_dim + d + 1]), k1, a[h][1]);
    }
  }
  for (int h = 0; h < H; ++h) s[h] = _mm512_add_ps(a[h][0], a[h][1]);
}

// Calls fn(tile, first, lo, hi) for each tile of a run of n positions from
// slot lane0 of the tiles at `tiles` (tile_bytes apart): position first +
// j is the tile's slot j, and the run covers its slots [lo, hi).
template <class Fn>
__attribute__((always_inline)) inline void for_each_tile(const uint8_t* tiles, int64_t tile_bytes,
                                                         int32_t lane0, int64_t n, const Fn& fn) {
  const int64_t n_tiles = (lane0 + n + kTileSlots - 1) / kTileSlots;
  for (int64_t t = 0; t < n_tiles; ++t) {
    const int64_t first = t * kTileSlots - lane0;
    fn(tiles + t * tile_bytes, first, std::max<int64_t>(0, -first),
       std::min<int64_t>(kTileSlots, n - first));
  }
}

}  // namespace

void attend_tile_scores_f16_avx512(const float* q, int32_t kv_heads, int32_t group,
                                   int32_t head_dim, float scale, const uint8_t* tiles,
                                   int64_t tile_bytes, int32_t lane0, int64_t n, float* scores) {
  const int64_t head_bytes = tile_head_bytes(DType::kF16, head_dim);
  const __m512 vscale = _mm512_set1_ps(scale);
  for_each_tile(tiles, tile_bytes, lane0, n,
                [&](const uint8_t* tile, int64_t first, int64_t lo, int64_t hi) {
                  for (int64_t g = 0; g < kv_heads; ++g) {
                    for (int64_t h0 = g * group; h0 < (g + 1) * group; h0 += 4) {
                      with_heads<4>(std::min<int64_t>(4, (g + 1) * group - h0), [&]<int H>() {
                        __m512 s[H];
                        tile_dots_f16<H>(tile + g * head_bytes, q + h0 * head_dim, head_dim, s);
                        for (int h = 0; h < H; ++h) {
                          float* out = scores + (h0 + h) * n;
                          if (lo == 0 && hi == kTileSlots) {
                            _mm512_storeu_ps(out + first, _mm512_mul_ps(s[h], vscale));
                            continue;
                          }
                          alignas(64) float lanes[kTileSlots];
                          _mm512_store_ps(lanes, _mm512_mul_ps(s[h], vscale));
                          std::memcpy(out + first + lo, lanes + lo,
                                      sizeof(float) * static_cast<size_t>(hi - lo));
                        }
                      });
                    }
                  }
                });
}

void attend_tile_values_f16_avx512(int32_t kv_heads, int32_t group, int32_t head_dim,
                                   const uint8_t* tiles, int64_t tile_bytes, int32_t lane0,
                                   int64_t n, const float* probs, float* acc) {
  const int64_t head_bytes = tile_head_bytes(DType::kF16, head_dim);
  const int64_t row_bytes = 2 * int64_t{head_dim};
  for_each_tile(
      tiles, tile_bytes, lane0, n, [&](const uint8_t* tile, int64_t first, int64_t lo, int64_t hi) {
        for (int64_t g = 0; g < kv_heads; ++g) {
          // The head's values are 16 rows: slots lo..hi - 1 in a row.
          const uint8_t* rows = tile + g * head_bytes + lo * row_bytes;
          for (int64_t h = g * group; h < (g + 1) * group; h += 4) {
            with_heads<4>(std::min<int64_t>(4, (g + 1) * group - h), [&]<int H>() {
              values_heads<DType::kF16, H>(rows, row_bytes, hi - lo, head_dim,
                                           probs + h * n + first + lo, n, acc + h * head_dim);
            });
          }
        }
      });
}

void attend_scores_avx512(const float* q, int32_t kv_heads, int32_t group, int32_t head_dim,
                          float scale, const void* k, DType type, int64_t stride, int64_t n,
                          float* scores, float* staging) {
  with_cache_type(type, [&]<DType T>() {
    scores_typed<T>(q, kv_heads, group, head_dim, scale, k, stride, n, scores, staging);
  });
}

void attend_values_avx512(int32_t kv_heads, int32_t group, int32_t head_dim, const void* v,
                          DType type, int64_t stride, int64_t n, const float* probs, float* acc) {
  with_cache_type(type, [&]<DType T>() {
    values_typed<T>(kv_heads, group, head_dim, v, stride, n, probs, acc);
  });
}

}  // namespace duet::onednn::detail
