// AVX-512 halves of decode attention; see attend_avx512.h.
#include "kernels/attend_avx512.h"

#include <algorithm>
#include <cstring>

#include "kernels/avx512_intrinsics.h"
#include "vector_kernels.h"

namespace duet::onednn::detail {
namespace {

constexpr int64_t kBlock = 16;  // positions per block: one score vector

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
  std::memcpy(&h, block, sizeof h);
  const __m512 d = _mm512_set1_ps(_cvtsh_ss(h));
  const auto* qs = reinterpret_cast<const __m128i*>(block + 2);
  *lo = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(qs))), d);
  *hi = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(qs + 1))), d);
}

// Calls fn(block, first, m) for the blocks of m ≤ kBlock positions of the n rows
// at base (rows `stride_bytes` apart, of which `row_bytes` are read), each
// after prefetching the next block.
template <class Fn>
void for_each_block(const uint8_t* base, int64_t n, int64_t stride_bytes, int64_t row_bytes,
                    const Fn& fn) {
  for (int64_t i0 = 0; i0 < n; i0 += kBlock) {
    const uint8_t* block = base + i0 * stride_bytes;
    for (int64_t r = kBlock; r < std::min(2 * kBlock, n - i0); ++r) {
      for (int64_t b = 0; b < row_bytes; b += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(block + r * stride_bytes + b), _MM_HINT_T0);
      }
    }
    fn(block, i0, std::min(kBlock, n - i0));
  }
}

// Lane j of the result is the sum of the lanes of p[j]. Each level adds
// the two halves of every position's partial sums, packing two vectors'
// positions into one: 16 → 8 → 4 → 2 → 1 vectors; the last level leaves
// position k + 4t in lane 4k + t, which one permute puts in order.
__attribute__((always_inline)) inline __m512 sum16(const __m512 p[16]) {
  __m512 a[8];
  for (int i = 0; i < 8; ++i) {
    a[i] = _mm512_add_ps(_mm512_shuffle_f32x4(p[2 * i], p[2 * i + 1], 0x44),
                         _mm512_shuffle_f32x4(p[2 * i], p[2 * i + 1], 0xee));
  }
  __m512 b[4];
  for (int i = 0; i < 4; ++i) {
    b[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0x88),
                         _mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0xdd));
  }
  __m512 c[2];
  for (int i = 0; i < 2; ++i) {
    c[i] = _mm512_add_ps(_mm512_shuffle_ps(b[2 * i], b[2 * i + 1], 0x44),
                         _mm512_shuffle_ps(b[2 * i], b[2 * i + 1], 0xee));
  }
  const __m512 d =
      _mm512_add_ps(_mm512_shuffle_ps(c[0], c[1], 0x88), _mm512_shuffle_ps(c[0], c[1], 0xdd));
  return _mm512_permutexvar_ps(
      _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), d);
}

// Calls body.template operator()<H>() with H = heads, 1 to 4.
template <class Body>
__attribute__((always_inline)) inline void with_heads(int64_t heads, const Body& body) {
  switch (heads) {
    case 1:
      return body.template operator()<1>();
    case 2:
      return body.template operator()<2>();
    case 3:
      return body.template operator()<3>();
    default:
      return body.template operator()<4>();
  }
}

// acc[h][c..c+16) += Σ_i p[h][i] * v_i[c..c+16) for H heads over the
// positions of one block of f32 or f16 values (q8_0: values_block_q8), 64
// dimensions at a time: each position's values are widened once into
// registers and feed 4·H accumulators, enough independent FMA chains that
// the FMA latency does not bind.
template <DType T, int H>
void values_heads(const uint8_t* v, int64_t stride_bytes, int64_t m, int32_t head_dim,
                  const float* probs, int64_t n, float* acc) {
  constexpr int kChunks = 4;
  for (int64_t c0 = 0; c0 < head_dim; c0 += 16 * kChunks) {
    const int64_t chunks = std::min<int64_t>(kChunks, (head_dim - c0) / 16);
    __m512 a[H][kChunks];
    for (int h = 0; h < H; ++h) {
      for (int u = 0; u < kChunks; ++u) {
        if (u < chunks) a[h][u] = _mm512_loadu_ps(acc + h * head_dim + c0 + 16 * u);
      }
    }
    for (int64_t i = 0; i < m; ++i) {
      __m512 x[kChunks];
      for (int u = 0; u < kChunks; ++u) {
        if (u < chunks) x[u] = load16<T>(v + i * stride_bytes, c0 + 16 * u);
      }
      for (int h = 0; h < H; ++h) {
        const __m512 p = _mm512_set1_ps(probs[h * n + i]);
        for (int u = 0; u < kChunks; ++u) {
          if (u < chunks) a[h][u] = _mm512_fmadd_ps(p, x[u], a[h][u]);
        }
      }
    }
    for (int h = 0; h < H; ++h) {
      for (int u = 0; u < kChunks; ++u) {
        if (u < chunks) _mm512_storeu_ps(acc + h * head_dim + c0 + 16 * u, a[h][u]);
      }
    }
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
  const uint8_t* row = v + c0 / 32 * 34 + 2;
  for (int64_t i = 0; i < m; ++i, row += stride_bytes) {
    __m512 x[4];
    for (int u = 0; u < 4; ++u) {
      if (u < chunks) {
        const auto* qs = reinterpret_cast<const __m128i*>(row + u / 2 * 34 + u % 2 * 16);
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
      const __m512i words = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), present, rows,
                                                        values + (c0 / 32 + b) * 34, 1);
      const __m512 d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(words));
      for (int h = 0; h < H; ++h) _mm512_storeu_ps(w[h][b], _mm512_mul_ps(p[h], d));
    }
    values_heads_q8<H>(values, stride_bytes, m, c0, blocks, w, head_dim, acc);
  }
}

// The scale-free scores of 16 (or, unless kFull, m < 16) keys against
// query head qh: lane j is qh · key j, key j the f32 row at rows + j * ld.
// The positions are unrolled so that their 16 sums stay in registers.
template <bool kFull>
__attribute__((always_inline)) inline __m512 dots16(const float* rows, int64_t ld, int64_t m,
                                                    const float* qh, int32_t head_dim) {
  __m512 part[kBlock];
  for (int64_t j = 0; j < kBlock; ++j) part[j] = _mm512_setzero_ps();
  for (int64_t c = 0; c < head_dim; c += 16) {
    const __m512 qc = _mm512_loadu_ps(qh + c);
#pragma GCC unroll 16
    for (int64_t j = 0; j < kBlock; ++j) {
      if (kFull || j < m)
        part[j] = _mm512_fmadd_ps(_mm512_loadu_ps(rows + j * ld + c), qc, part[j]);
    }
  }
  return sum16(part);
}

// Rows j < m of head_dim `T` elements at keys + j * stride_bytes, widened
// to f32 rows of head_dim at out (q8_0: one scale per 32 elements).
template <DType T>
void widen_keys(const uint8_t* keys, int64_t stride_bytes, int64_t m, int32_t head_dim,
                float* out) {
  for (int64_t j = 0; j < m; ++j) {
    const uint8_t* row = keys + j * stride_bytes;
    float* o = out + j * head_dim;
    if constexpr (T == DType::kQ8_0) {
      for (int64_t c = 0; c < head_dim; c += 32, row += 34) {
        __m512 lo, hi;
        q8_block(row, &lo, &hi);
        _mm512_storeu_ps(o + c, lo);
        _mm512_storeu_ps(o + c + 16, hi);
      }
    } else {
      for (int64_t c = 0; c < head_dim; c += 16) _mm512_storeu_ps(o + c, load16<T>(row, c));
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
    // The keys as f32 rows: an f32 cache's in place, others widened once
    // into `staging` for all query heads of the group.
    const float* rows = reinterpret_cast<const float*>(keys);
    int64_t ld = stride_bytes / 4;
    if constexpr (T != DType::kF32) {
      widen_keys<T>(keys, stride_bytes, m, head_dim, staging);
      rows = staging;
      ld = head_dim;
    }
    for (int64_t h = g * group; h < (g + 1) * group; ++h) {
      const float* qh = q + h * head_dim;
      const __m512 dots = m == kBlock ? dots16<true>(rows, ld, m, qh, head_dim)
                                      : dots16<false>(rows, ld, m, qh, head_dim);
      _mm512_mask_storeu_ps(scores + h * n, lanes, _mm512_mul_ps(dots, vscale));
    }
  }
}

template <DType T>
void scores_typed(const float* q, int32_t kv_heads, int32_t group, int32_t head_dim, float scale,
                  const void* k, int64_t stride_bytes, int64_t n, float* scores, float* staging) {
  const int64_t head_bytes = cache_head_bytes(T, head_dim);
  for_each_block(static_cast<const uint8_t*>(k), n, stride_bytes, kv_heads * head_bytes,
                 [&](const uint8_t* block, int64_t i0, int64_t m) {
                   scores_block<T>(q, kv_heads, group, head_dim, scale, block, stride_bytes, m,
                                   scores + i0, n, staging);
                 });
}

template <DType T>
void values_typed(int32_t kv_heads, int32_t group, int32_t head_dim, const void* v,
                  int64_t stride_bytes, int64_t n, const float* probs, float* acc) {
  const int64_t head_bytes = cache_head_bytes(T, head_dim);
  for_each_block(static_cast<const uint8_t*>(v), n, stride_bytes, kv_heads * head_bytes,
                 [&](const uint8_t* block, int64_t i0, int64_t m) {
                   for (int64_t g = 0; g < kv_heads; ++g) {
                     const uint8_t* values = block + g * head_bytes;
                     // Heads four at a time: four accumulators per 16 dimensions stay in registers.
                     for (int64_t h = g * group; h < (g + 1) * group; h += 4) {
                       const float* p = probs + h * n + i0;
                       float* a = acc + h * head_dim;
                       with_heads(std::min<int64_t>(4, (g + 1) * group - h), [&]<int H>() {
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

// ---- q8_0 keys with VNNI ----------------------------------------------------
//
// Keys stay int8: each query head is quantized to two int8 terms per block
// of 32 (q ≈ s·(hi + lo/256), about 16 bits, as Q8Activations does for the
// matvecs), 16 positions' keys are transposed so that lane j of a vector
// holds four bytes of position j, and vpdpbusd multiplies them by four
// broadcast query bytes: 64 multiply-adds per instruction, no horizontal
// sums. vpdpbusd takes unsigned bytes on one side, so keys are read as
// k + 128 and 128·Σq is taken off again.

constexpr int kQ8 = 32;  // elements per q8_0 block

// One KV head's query heads in two int8 terms, per block b of head h:
// hi/lo at (h * blocks + b) * 32, scale s / 256 and the correction
// 128 · Σ(256·hi + lo) at h * blocks + b.
struct QueryTerms {
  int8_t* hi;
  int8_t* lo;
  float* unit;
  int32_t* offset;
};

void quantize_queries(const float* q, int32_t group, int32_t head_dim, QueryTerms t) {
  const int32_t blocks = head_dim / kQ8;
  for (int64_t hb = 0; hb < int64_t{group} * blocks; ++hb) {
    const float* x = q + hb * kQ8;
    const __m512 a = _mm512_loadu_ps(x), b = _mm512_loadu_ps(x + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(a), _mm512_abs_ps(b)));
    const float s = amax / 127.0f;
    const __m512 inv = _mm512_set1_ps(s != 0.0f ? 1.0f / s : 0.0f);
    int32_t sum = 0;
    for (int half = 0; half < 2; ++half) {
      const __m512 y = _mm512_mul_ps(half ? b : a, inv);
      const __m512i hi = _mm512_cvtps_epi32(y);  // to nearest: |hi| ≤ 127
      const __m512 rest =
          _mm512_mul_ps(_mm512_sub_ps(y, _mm512_cvtepi32_ps(hi)), _mm512_set1_ps(256.0f));
      const __m512i lo =
          _mm512_max_epi32(_mm512_set1_epi32(-127),
                           _mm512_min_epi32(_mm512_set1_epi32(127), _mm512_cvtps_epi32(rest)));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(t.hi + hb * kQ8 + 16 * half),
                       _mm512_cvtepi32_epi8(hi));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(t.lo + hb * kQ8 + 16 * half),
                       _mm512_cvtepi32_epi8(lo));
      sum += _mm512_reduce_add_epi32(_mm512_add_epi32(_mm512_slli_epi32(hi, 8), lo));
    }
    t.unit[hb] = s / 256.0f;
    t.offset[hb] = 128 * sum;
  }
}

// Transposes 16 rows of 16 dwords: r[c] becomes dword c of every row.
__attribute__((always_inline)) inline void transpose16(__m512i r[16]) {
  __m512i t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {
    r[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
    r[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
    r[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    r[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 4; ++j) {
      t[8 * i + j] = _mm512_shuffle_i32x4(r[8 * i + j], r[8 * i + 4 + j], 0x88);
      t[8 * i + 4 + j] = _mm512_shuffle_i32x4(r[8 * i + j], r[8 * i + 4 + j], 0xdd);
    }
  }
  for (int j = 0; j < 8; ++j) {
    r[j] = _mm512_shuffle_i32x4(t[j], t[8 + j], 0x88);
    r[8 + j] = _mm512_shuffle_i32x4(t[j], t[8 + j], 0xdd);
  }
}

// The keys of m ≤ 16 positions (rows stride_bytes apart from `keys`) for
// the scores: keyt[(p * 16 + c)] is dword c of blocks 2p and 2p + 1 of
// every position, bytes offset by 128 (positions ≥ m read as zeros), and
// scale[b * 16 + j] the f32 scale of block b of position j.
__attribute__((target("avx512vnni"))) void transpose_keys(const uint8_t* keys, int64_t stride_bytes,
                                                          int64_t m, int32_t head_dim,
                                                          __m512i* keyt, float* scale) {
  const int32_t blocks = head_dim / kQ8;
  for (int32_t p = 0; p < blocks / 2; ++p) {
    __m512i r[16];
    for (int64_t j = 0; j < kBlock; ++j) {
      if (j >= m) {
        r[j] = _mm512_setzero_si512();
        continue;
      }
      const uint8_t* blk = keys + j * stride_bytes + 2 * p * 34 + 2;
      r[j] = _mm512_inserti64x4(
          _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk))),
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 34)), 1);
    }
    transpose16(r);
    for (int c = 0; c < 16; ++c) {
      _mm512_storeu_si512(keyt + p * 16 + c,
                          _mm512_xor_si512(r[c], _mm512_set1_epi8(static_cast<char>(0x80))));
    }
  }
  // The scales by one gather per block (a scalar copy of each would stall
  // the vector load that follows on store forwarding): four bytes from each
  // position's block start, of which the low two are the f16 scale.
  const __m512i rows =
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_epi32(static_cast<int32_t>(stride_bytes)));
  const auto present = static_cast<__mmask16>((1u << m) - 1);
  for (int32_t b = 0; b < blocks; ++b) {
    const __m512i words =
        _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), present, rows, keys + b * 34, 1);
    _mm512_storeu_ps(scale + b * kBlock, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(words)));
  }
}

// Scores of the positions in keyt/scale for query head h of `t`.
__attribute__((target("avx512vnni"))) __m512 vnni_dots16(const __m512i* keyt, const float* scale,
                                                         QueryTerms t, int64_t h, int32_t blocks) {
  __m512 total = _mm512_setzero_ps();
  for (int32_t b = 0; b < blocks; ++b) {
    const __m512i* k = keyt + (b / 2) * 16 + (b % 2) * 8;
    const int64_t hb = h * blocks + b;
    const auto* hi = reinterpret_cast<const int32_t*>(t.hi + hb * kQ8);
    const auto* lo = reinterpret_cast<const int32_t*>(t.lo + hb * kQ8);
    // Four chains of vpdpbusd (its latency would bind one).
    __m512i hi0 = _mm512_setzero_si512(), hi1 = hi0, lo0 = hi0, lo1 = hi0;
    for (int c = 0; c < 8; c += 2) {
      const __m512i k0 = _mm512_loadu_si512(k + c), k1 = _mm512_loadu_si512(k + c + 1);
      hi0 = _mm512_dpbusd_epi32(hi0, k0, _mm512_set1_epi32(hi[c]));
      hi1 = _mm512_dpbusd_epi32(hi1, k1, _mm512_set1_epi32(hi[c + 1]));
      lo0 = _mm512_dpbusd_epi32(lo0, k0, _mm512_set1_epi32(lo[c]));
      lo1 = _mm512_dpbusd_epi32(lo1, k1, _mm512_set1_epi32(lo[c + 1]));
    }
    __m512i acc = _mm512_add_epi32(_mm512_slli_epi32(_mm512_add_epi32(hi0, hi1), 8),
                                   _mm512_add_epi32(lo0, lo1));
    acc = _mm512_sub_epi32(acc, _mm512_set1_epi32(t.offset[hb]));
    total = _mm512_fmadd_ps(
        _mm512_cvtepi32_ps(acc),
        _mm512_mul_ps(_mm512_loadu_ps(scale + b * kBlock), _mm512_set1_ps(t.unit[hb])), total);
  }
  return total;
}

// attend_scores_avx512 for q8_0 keys on a VNNI CPU. REQUIRES: head_dim a
// multiple of 64; staging for 16 * head_dim + kv_heads * group * head_dim
// floats.
__attribute__((target("avx512vnni"))) void scores_q8_vnni(const float* q, int32_t kv_heads,
                                                          int32_t group, int32_t head_dim,
                                                          float scale, const uint8_t* k,
                                                          int64_t stride_bytes, int64_t n,
                                                          float* scores, float* staging) {
  const int32_t blocks = head_dim / kQ8;
  const int64_t head_bytes = cache_head_bytes(DType::kQ8_0, head_dim);
  const int64_t heads = int64_t{kv_heads} * group;
  // staging: a block's transposed keys (head_dim / 4 vectors) and their
  // scales, then the query terms of every head.
  auto* keyt = reinterpret_cast<__m512i*>(staging);
  float* key_scale = staging + 4 * head_dim;
  auto* bytes = reinterpret_cast<int8_t*>(key_scale + blocks * kBlock);
  const int64_t terms = heads * head_dim;
  auto* unit = reinterpret_cast<float*>(bytes + 2 * terms);
  const QueryTerms t{bytes, bytes + terms, unit, reinterpret_cast<int32_t*>(unit + heads * blocks)};
  quantize_queries(q, static_cast<int32_t>(heads), head_dim, t);
  const __m512 vscale = _mm512_set1_ps(scale);
  for_each_block(
      k, n, stride_bytes, kv_heads * head_bytes, [&](const uint8_t* block, int64_t i0, int64_t m) {
        const auto lanes = static_cast<__mmask16>((1u << m) - 1);
        for (int64_t g = 0; g < kv_heads; ++g) {
          transpose_keys(block + g * head_bytes, stride_bytes, m, head_dim, keyt, key_scale);
          for (int64_t h = g * group; h < (g + 1) * group; ++h) {
            const __m512 dots = vnni_dots16(keyt, key_scale, t, h, blocks);
            _mm512_mask_storeu_ps(scores + h * n + i0, lanes, _mm512_mul_ps(dots, vscale));
          }
        }
      });
}

}  // namespace

void attend_scores_avx512(const float* q, int32_t kv_heads, int32_t group, int32_t head_dim,
                          float scale, const void* k, DType type, int64_t stride, int64_t n,
                          float* scores, float* staging, bool vnni) {
  if (int8_scores(vnni, type, head_dim)) {
    return scores_q8_vnni(q, kv_heads, group, head_dim, scale, static_cast<const uint8_t*>(k),
                          stride, n, scores, staging);
  }
  switch (type) {
    case DType::kF16:
      return scores_typed<DType::kF16>(q, kv_heads, group, head_dim, scale, k, stride, n, scores,
                                       staging);
    case DType::kQ8_0:
      return scores_typed<DType::kQ8_0>(q, kv_heads, group, head_dim, scale, k, stride, n, scores,
                                        staging);
    default:
      return scores_typed<DType::kF32>(q, kv_heads, group, head_dim, scale, k, stride, n, scores,
                                       staging);
  }
}

void attend_values_avx512(int32_t kv_heads, int32_t group, int32_t head_dim, const void* v,
                          DType type, int64_t stride, int64_t n, const float* probs, float* acc) {
  switch (type) {
    case DType::kF16:
      return values_typed<DType::kF16>(kv_heads, group, head_dim, v, stride, n, probs, acc);
    case DType::kQ8_0:
      return values_typed<DType::kQ8_0>(kv_heads, group, head_dim, v, stride, n, probs, acc);
    default:
      return values_typed<DType::kF32>(kv_heads, group, head_dim, v, stride, n, probs, acc);
  }
}

}  // namespace duet::onednn::detail
