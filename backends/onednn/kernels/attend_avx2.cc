// AVX2 halves of decode attention; see attend_avx2.h.
#include "kernels/attend_avx2.h"

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "duet/block_formats.h"
#include "kernels/attend_blocks.h"
#include "kernels/with_heads.h"
#include "vector_kernels.h"

namespace duet::onednn::detail {
namespace {

constexpr int64_t kBlock = 8;  // positions per block: one score vector

// The q8_0 cache rows' blocks (duet/block_formats.h): 32 values each.
using duet::blocks::BlockQ8_0;
constexpr int64_t kQ8Bytes = sizeof(BlockQ8_0);
constexpr int64_t kQ8Quants = offsetof(BlockQ8_0, qs);

// Values [c, c + 8) of a cache row of f32 or f16 elements.
template <DType T>
__m256 load8(const uint8_t* row, int64_t c) {
  static_assert(T == DType::kF32 || T == DType::kF16);
  if constexpr (T == DType::kF16) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * c)));
  } else {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + c);
  }
}

// 8 int8 values at p as floats.
__m256 widen8(const uint8_t* p) {
  return _mm256_cvtepi32_ps(
      _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}

// The f16 value at p as a float.
float half_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof h);
  return _cvtsh_ss(h);
}

// Lane j: the sum of part[j]'s lanes.
__m256 sum8(const __m256 (&part)[kBlock]) {
  // Pairs, then quads, within each 128-bit half: lane k (k < 4) of
  // q0123's low half sums part[k]'s low four lanes, of its high half
  // part[k]'s high four (q4567: part[4 + k]'s); the halves are then added.
  const __m256 q0123 =
      _mm256_hadd_ps(_mm256_hadd_ps(part[0], part[1]), _mm256_hadd_ps(part[2], part[3]));
  const __m256 q4567 =
      _mm256_hadd_ps(_mm256_hadd_ps(part[4], part[5]), _mm256_hadd_ps(part[6], part[7]));
  return _mm256_add_ps(_mm256_permute2f128_ps(q0123, q4567, 0x20),
                       _mm256_permute2f128_ps(q0123, q4567, 0x31));
}

// ---- scores ------------------------------------------------------------------

// The scale-free scores of 8 (or, unless kFull, m < 8) keys against query
// head qh: lane j is qh · key j, dimensions c..c+7 of key j the 8 floats
// at keys + j * row_step + c / 8 * chunk_step (rows of an f32 cache in
// place: row_step its stride, chunk_step 8; widen_keys' staging: 8 and 64).
template <bool kFull>
__attribute__((always_inline)) inline __m256 dots8(const float* keys, int64_t row_step,
                                                   int64_t chunk_step, int64_t m, const float* qh,
                                                   int32_t head_dim) {
  __m256 part[kBlock];
  for (int64_t j = 0; j < kBlock; ++j) part[j] = _mm256_setzero_ps();
  for (int64_t c = 0; c < head_dim; c += 8, keys += chunk_step) {
    const __m256 qc = _mm256_loadu_ps(qh + c);
#pragma GCC unroll 8
    for (int64_t j = 0; j < kBlock; ++j) {
      if (kFull || j < m)
        part[j] = _mm256_fmadd_ps(_mm256_loadu_ps(keys + j * row_step), qc, part[j]);
    }
  }
  return sum8(part);
}

// Rows j < m of head_dim `T` elements at keys + j * stride_bytes, widened
// to f32 at out by 8 dimensions: dimensions c..c+7 of row j at
// out + 8 * (c + j).
template <DType T>
void widen_keys(const uint8_t* keys, int64_t stride_bytes, int64_t m, int32_t head_dim,
                float* out) {
  for (int64_t j = 0; j < m; ++j) {
    const uint8_t* row = keys + j * stride_bytes;
    float* o = out + 8 * j;
    if constexpr (T == DType::kQ8_0) {
      for (int64_t c = 0; c < head_dim; c += duet::blocks::kQK, row += kQ8Bytes) {
        const __m256 d = _mm256_set1_ps(half_at(row + offsetof(BlockQ8_0, d)));
        for (int64_t u = 0; u < 4; ++u) {
          _mm256_storeu_ps(o + 8 * (c + 8 * u), _mm256_mul_ps(widen8(row + kQ8Quants + 8 * u), d));
        }
      }
    } else {
      for (int64_t c = 0; c < head_dim; c += 8) _mm256_storeu_ps(o + 8 * c, load8<T>(row, c));
    }
  }
}

// The scores of one block of m ≤ 8 positions (keys at block, rows
// stride_bytes apart) for every query head: scores[h * n + j] for j < m.
template <DType T>
void scores_block(const float* q, int32_t kv_heads, int32_t group, int32_t head_dim, float scale,
                  const uint8_t* block, int64_t stride_bytes, int64_t m, float* scores, int64_t n,
                  float* staging) {
  const int64_t head_bytes = cache_head_bytes(T, head_dim);
  const __m256 vscale = _mm256_set1_ps(scale);
  for (int64_t g = 0; g < kv_heads; ++g) {
    const uint8_t* keys = block + g * head_bytes;
    // The keys: an f32 cache's in place, others widened once into `staging`
    // for all query heads of the group.
    const float* rows = reinterpret_cast<const float*>(keys);
    int64_t row_step = stride_bytes / 4, chunk_step = 8;
    if constexpr (T != DType::kF32) {
      widen_keys<T>(keys, stride_bytes, m, head_dim, staging);
      rows = staging;
      row_step = 8;
      chunk_step = 8 * kBlock;
    }
    for (int64_t h = g * group; h < (g + 1) * group; ++h) {
      const float* qh = q + h * head_dim;
      if (m == kBlock) {
        const __m256 dots = dots8<true>(rows, row_step, chunk_step, m, qh, head_dim);
        _mm256_storeu_ps(scores + h * n, _mm256_mul_ps(dots, vscale));
      } else {
        alignas(32) float out[kBlock];
        _mm256_store_ps(
            out, _mm256_mul_ps(dots8<false>(rows, row_step, chunk_step, m, qh, head_dim), vscale));
        std::memcpy(scores + h * n, out, static_cast<size_t>(m) * sizeof(float));
      }
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

// ---- values ------------------------------------------------------------------

// acc[h][c0..c0+16) += Σ_i w[h][i] * x_i for H heads over m positions, x_i
// dimensions c0..c0+15 of position i's values: 16 f32 or f16 elements from
// byte `at` of its row (rows stride_bytes apart from `values`), or, for
// q8_0, 16 int8 values there, widened only (their scale is in w). Head h's
// weights at w + h * w_step, its accumulators at acc + h * head_dim.
template <DType T, int H>
void values16(const uint8_t* values, int64_t stride_bytes, int64_t m, int64_t at, const float* w,
              int64_t w_step, int32_t head_dim, float* acc) {
  __m256 a[H][2];
  for (int h = 0; h < H; ++h) {
    a[h][0] = _mm256_loadu_ps(acc + h * head_dim);
    a[h][1] = _mm256_loadu_ps(acc + h * head_dim + 8);
  }
  const uint8_t* row = values + at;
  for (int64_t i = 0; i < m; ++i, row += stride_bytes) {
    __m256 x0, x1;
    if constexpr (T == DType::kQ8_0) {
      x0 = widen8(row);
      x1 = widen8(row + 8);
    } else {
      x0 = load8<T>(row, 0);
      x1 = load8<T>(row, 8);
    }
    for (int h = 0; h < H; ++h) {
      const __m256 p = _mm256_broadcast_ss(w + h * w_step + i);
      a[h][0] = _mm256_fmadd_ps(p, x0, a[h][0]);
      a[h][1] = _mm256_fmadd_ps(p, x1, a[h][1]);
    }
  }
  for (int h = 0; h < H; ++h) {
    _mm256_storeu_ps(acc + h * head_dim, a[h][0]);
    _mm256_storeu_ps(acc + h * head_dim + 8, a[h][1]);
  }
}

// values_typed's step: H heads (head h's probabilities of the block at
// probs + h * n, its accumulators at acc + h * head_dim) over the m ≤ 8
// positions of one block of one KV head's values, 16 dimensions at a time.
// For q8_0 each block's scales are folded into the probabilities first.
template <DType T, int H>
void values_block(const uint8_t* values, int64_t stride_bytes, int64_t m, int32_t head_dim,
                  const float* probs, int64_t n, float* acc) {
  if constexpr (T != DType::kQ8_0) {
    constexpr int64_t kElement = T == DType::kF16 ? 2 : 4;
    for (int64_t c0 = 0; c0 < head_dim; c0 += 16) {
      values16<T, H>(values, stride_bytes, m, kElement * c0, probs, n, head_dim, acc + c0);
    }
  } else {
    alignas(32) float p[H][kBlock] = {};
    for (int h = 0; h < H; ++h) {
      std::memcpy(p[h], probs + h * n, static_cast<size_t>(m) * sizeof(float));
    }
    for (int64_t c0 = 0; c0 < head_dim; c0 += duet::blocks::kQK) {
      const uint8_t* block = values + c0 / duet::blocks::kQK * kQ8Bytes;
      alignas(32) float d[kBlock] = {};
      for (int64_t i = 0; i < m; ++i) {
        d[i] = half_at(block + i * stride_bytes + offsetof(BlockQ8_0, d));
      }
      alignas(32) float w[H][kBlock];
      for (int h = 0; h < H; ++h) {
        _mm256_store_ps(w[h], _mm256_mul_ps(_mm256_load_ps(p[h]), _mm256_load_ps(d)));
      }
      for (int64_t half = 0; half < 2; ++half) {
        values16<T, H>(values, stride_bytes, m, block - values + kQ8Quants + 16 * half, w[0],
                       kBlock, head_dim, acc + c0 + 16 * half);
      }
    }
  }
}

template <DType T>
void values_typed(int32_t kv_heads, int32_t group, int32_t head_dim, const void* v,
                  int64_t stride_bytes, int64_t n, const float* probs, float* acc) {
  const int64_t head_bytes = cache_head_bytes(T, head_dim);
  for_each_block<kBlock>(static_cast<const uint8_t*>(v), n, stride_bytes, kv_heads * head_bytes,
                         [&](const uint8_t* block, int64_t i0, int64_t m) {
                           for (int64_t g = 0; g < kv_heads; ++g) {
                             const uint8_t* values = block + g * head_bytes;
                             // Heads four at a time: their 8 accumulators stay in registers.
                             for (int64_t h = g * group; h < (g + 1) * group; h += 4) {
                               with_heads<4>(
                                   std::min<int64_t>(4, (g + 1) * group - h), [&]<int H>() {
                                     values_block<T, H>(values, stride_bytes, m, head_dim,
                                                        probs + h * n + i0, n, acc + h * head_dim);
                                   });
                             }
                           }
                         });
}

}  // namespace

void attend_scores_avx2(const float* q, int32_t kv_heads, int32_t group, int32_t head_dim,
                        float scale, const void* k, DType type, int64_t stride, int64_t n,
                        float* scores, float* staging) {
  with_cache_type(type, [&]<DType T>() {
    scores_typed<T>(q, kv_heads, group, head_dim, scale, k, stride, n, scores, staging);
  });
}

void attend_values_avx2(int32_t kv_heads, int32_t group, int32_t head_dim, const void* v,
                        DType type, int64_t stride, int64_t n, const float* probs, float* acc) {
  with_cache_type(type, [&]<DType T>() {
    values_typed<T>(kv_heads, group, head_dim, v, stride, n, probs, acc);
  });
}

}  // namespace duet::onednn::detail
