// AVX2 + FMA + F16C kernels, for x86-64 CPUs without AVX-512. The structure
// follows qgemv_avx512.cc with 256-bit vectors: one weight block per integer
// dot product (vpmaddubsw + vpmaddwd), blocks taken four at a time so their
// scales are converted and combined with the activation scales by one
// instruction each, kRows rows per pass.
#include <immintrin.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "duet/block_formats.h"
#include "kernels/prefetch.h"
#include "kernels/qgemv_paths.h"

namespace duet::onednn::detail {
namespace {

constexpr int64_t kBlock = duet::blocks::kQK;
constexpr int kGroup = 4;  // blocks per group
constexpr int kRows = 2;   // rows per pass; more would spill the 16 YMM registers

using duet::blocks::kBlockBytes;
template <DType T>
constexpr int kQsOffset = static_cast<int>(offsetof(typename duet::blocks::BlockOf<T>::type, qs));

float hsum(__m256 v) {
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

// (dw, mw) of the first t blocks of a group as [d0 m0 d1 m1 ...], zeros past
// t; q4_0's minimum is -8d, q8_0's odd lanes repeat d and are never read.
template <DType T>
__m256 weight_scale_pairs(const uint8_t* blk, int t) {
  // Four scalar loads, not vpgatherdd: on current Intel cores the microcode
  // mitigation of Gather Data Sampling makes a gather cost ~10 cycles. Each
  // load takes the block's first 4 bytes: {d, m} for q4_1; d and two quant
  // bytes, cleared below, for the others.
  auto head = [&](int j) {
    int32_t v = 0;
    if (j < t) std::memcpy(&v, blk + j * kBlockBytes<T>, sizeof v);
    return v;
  };
  const __m128i g = _mm_setr_epi32(head(0), head(1), head(2), head(3));
  if constexpr (T == DType::kQ4_1) {
    return _mm256_cvtph_ps(g);
  } else {
    const __m256 d = _mm256_moveldup_ps(_mm256_cvtph_ps(_mm_and_si128(g, _mm_set1_epi32(0xffff))));
    if constexpr (T == DType::kQ4_0)
      return _mm256_mul_ps(d, _mm256_setr_ps(1, -8, 1, -8, 1, -8, 1, -8));
    return d;
  }
}

// Prefetches the same group into L1 where the next pass over R rows reads
// (`near`, one pass on) and into L2 `far` bytes on: the hardware prefetchers
// lag on R interleaved streams (see qgemv_avx512.cc).
template <DType T>
void prefetch_ahead(const uint8_t* blk, int64_t near, int64_t far) {
  prefetch_lines<CacheLevel::kL1>(blk + near, kGroup * kBlockBytes<T>);
  prefetch_lines<CacheLevel::kL2>(blk + far, kGroup * kBlockBytes<T>);
}

// Σ w*x per 32-bit lane over one block (8 lanes of 4 products).
template <DType T>
__m256i block_dot(const uint8_t* blk, __m256i x) {
  const __m256i ones = _mm256_set1_epi16(1);
  const uint8_t* qs = blk + kQsOffset<T>;
  if constexpr (T == DType::kQ8_0) {
    // vpmaddubsw multiplies unsigned by signed bytes: |w| * (x with w's sign).
    // Pairs stay within int16: 2 * 128 * 127 < 2^15 (x is never -128).
    const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs));
    return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w)),
                             ones);
  } else {
    // Low nibbles are elements 0..15, high nibbles 16..31: the order of x.
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
    const __m256i w =
        _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(v, 4), v), _mm256_set1_epi8(0x0f));
    return _mm256_madd_epi16(_mm256_maddubs_epi16(w, x), ones);
  }
}

// y[r0 .. r0+R) for the quantized types, activations of `Terms` terms.
template <DType T, int R, int Terms>
void rows_quantized(const GemvArgs& a, int64_t r0) {
  const int64_t nb = a.xq->blocks();
  const int8_t* qx = a.xq->q();
  const int8_t* qx_lo = a.xq->q_lo();
  const float* sx = a.xq->scales();
  const uint8_t* row[R];
  __m256 acc[R];
  __m256 acc_min[R];
  for (int r = 0; r < R; ++r) {
    row[r] = a.w + (r0 + r) * a.row_bytes;
    acc[r] = _mm256_setzero_ps();
    acc_min[r] = _mm256_setzero_ps();
  }
  const int64_t near = R * a.row_bytes, far = far_prefetch_bytes(near);
  auto group = [&](int64_t b, int t) __attribute__((always_inline)) {
    const __m256 xs = _mm256_load_ps(sx + 2 * b);
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r) {
      const uint8_t* blk = row[r] + b * kBlockBytes<T>;
      prefetch_ahead<T>(blk, near, far);
      const __m256 p = _mm256_mul_ps(weight_scale_pairs<T>(blk, t), xs);
      if constexpr (T != DType::kQ8_0) acc_min[r] = _mm256_add_ps(acc_min[r], p);
#pragma GCC unroll 4
      for (int j = 0; j < t; ++j) {
        const __m256i x =
            _mm256_load_si256(reinterpret_cast<const __m256i*>(qx + (b + j) * kBlock));
        __m256i sums = block_dot<T>(blk + j * kBlockBytes<T>, x);
        if constexpr (Terms == 2) {  // 256*Σ(w*q) + Σ(w*q_lo), see qgemv.h
          const __m256i x_lo =
              _mm256_load_si256(reinterpret_cast<const __m256i*>(qx_lo + (b + j) * kBlock));
          sums = _mm256_add_epi32(_mm256_slli_epi32(sums, 8),
                                  block_dot<T>(blk + j * kBlockBytes<T>, x_lo));
        }
        const __m256 scale = _mm256_permutevar8x32_ps(p, _mm256_set1_epi32(2 * j));
        acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), scale, acc[r]);
      }
    }
  };
  int64_t b = 0;
  for (; b + kGroup <= nb; b += kGroup) group(b, kGroup);
  if (b < nb) group(b, static_cast<int>(nb - b));
  // acc_min's odd lanes hold the mw*sx terms; its even lanes are dropped.
  const __m256 odd = _mm256_castsi256_ps(_mm256_setr_epi32(0, -1, 0, -1, 0, -1, 0, -1));
  for (int r = 0; r < R; ++r) a.y[r0 + r] = hsum(acc[r]) + hsum(_mm256_and_ps(acc_min[r], odd));
}

template <DType T>
__m256 load_weights(const uint8_t* p) {
  if constexpr (T == DType::kF32) return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

template <DType T>
float load_weight(const uint8_t* p) {
  if constexpr (T == DType::kF32)
    return _mm_cvtss_f32(_mm_load_ss(reinterpret_cast<const float*>(p)));
  return _cvtsh_ss(static_cast<unsigned short>(p[0] | p[1] << 8));
}

// f32 / f16 weights: 8 columns per step, then the k % 8 remaining one by one.
template <DType T, int R>
void rows_float(const GemvArgs& a, int64_t r0) {
  constexpr int64_t elem = T == DType::kF32 ? 4 : 2;
  const uint8_t* row[R];
  __m256 acc[R];
  for (int r = 0; r < R; ++r) {
    row[r] = a.w + (r0 + r) * a.row_bytes;
    acc[r] = _mm256_setzero_ps();
  }
  int64_t c = 0;
  for (; c + 8 <= a.k; c += 8) {
    const __m256 xv = _mm256_loadu_ps(a.x + c);
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r)
      acc[r] = _mm256_fmadd_ps(load_weights<T>(row[r] + c * elem), xv, acc[r]);
  }
  for (int r = 0; r < R; ++r) {
    float tail = 0.0f;
    for (int64_t i = c; i < a.k; ++i) tail += load_weight<T>(row[r] + i * elem) * a.x[i];
    a.y[r0 + r] = hsum(acc[r]) + tail;
  }
}

template <void (*RowsN)(const GemvArgs&, int64_t), void (*Rows1)(const GemvArgs&, int64_t)>
void all_rows(const GemvArgs& a) {
  int64_t r = a.row_begin;
  for (; r + kRows <= a.row_end; r += kRows) RowsN(a, r);
  for (; r < a.row_end; ++r) Rows1(a, r);
}

template <DType T>
void quantized_rows(const GemvArgs& a) {
  if (a.xq->terms() == 2) {
    all_rows<rows_quantized<T, kRows, 2>, rows_quantized<T, 1, 2>>(a);
  } else {
    all_rows<rows_quantized<T, kRows, 1>, rows_quantized<T, 1, 1>>(a);
  }
}

}  // namespace

void gemv_avx2(const GemvArgs& a) {
  switch (a.wtype) {
    case DType::kQ4_0:
      quantized_rows<DType::kQ4_0>(a);
      return;
    case DType::kQ4_1:
      quantized_rows<DType::kQ4_1>(a);
      return;
    case DType::kQ8_0:
      quantized_rows<DType::kQ8_0>(a);
      return;
    case DType::kF32:
      all_rows<rows_float<DType::kF32, kRows>, rows_float<DType::kF32, 1>>(a);
      return;
    default:
      all_rows<rows_float<DType::kF16, kRows>, rows_float<DType::kF16, 1>>(a);
      return;
  }
}

void quantize_avx2(const float* x, int64_t k, int8_t* q, float* scales) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  for (int64_t b = 0; b < k / kBlock; ++b) {
    const float* xb = x + b * kBlock;
    __m256 v[4];
    __m256 m = _mm256_setzero_ps();
    for (int i = 0; i < 4; ++i) {
      v[i] = _mm256_loadu_ps(xb + 8 * i);
      m = _mm256_max_ps(m, _mm256_and_ps(v[i], abs_mask));
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    const float amax = _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
    // The same float operations as quantize_scalar, so the same bits.
    const float d = amax / 127.0f;
    const float inverse = d != 0.0f ? 1.0f / d : 0.0f;
    const __m256 id = _mm256_set1_ps(std::isfinite(inverse) ? inverse : 0.0f);
    __m256i qi[4];
    for (int i = 0; i < 4; ++i) qi[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], id));
    const __m256i total =
        _mm256_add_epi32(_mm256_add_epi32(qi[0], qi[1]), _mm256_add_epi32(qi[2], qi[3]));
    // The packs interleave 128-bit lanes; the permute restores element order.
    const __m256i packed =
        _mm256_packs_epi16(_mm256_packs_epi32(qi[0], qi[1]), _mm256_packs_epi32(qi[2], qi[3]));
    _mm256_storeu_si256(
        reinterpret_cast<__m256i*>(q + b * kBlock),
        _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
    const __m128i t4 =
        _mm_add_epi32(_mm256_castsi256_si128(total), _mm256_extracti128_si256(total, 1));
    const __m128i t2 = _mm_add_epi32(t4, _mm_unpackhi_epi64(t4, t4));
    const int32_t sum = _mm_cvtsi128_si32(_mm_add_epi32(t2, _mm_shuffle_epi32(t2, 1)));
    scales[2 * b] = d;
    scales[2 * b + 1] = d * static_cast<float>(sum);
  }
}

}  // namespace duet::onednn::detail
