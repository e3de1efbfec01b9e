// AVX-512 kernels (F, BW, VL). This file is compiled twice: as the kAvx512
// path, where the byte dot products use vpmaddubsw + vpmaddwd, and with
// DUET_QGEMV_VNNI=1 as the kAvx512Vnni path, where they use vpdpbusd. One
// source, two instruction sets, no function shared between them: everything
// but the entry points has internal linkage. The activation quantization
// (quantize_terms_avx512) is built in the kAvx512 pass only and serves both
// paths.
//
// Shape of every quantized kernel: weight blocks are taken four at a time
// (a "group", read with whole-vector loads and regrouped by permutes, see
// Layout); kRows rows are processed together so each activation load and
// shuffle serves them all, and each row prefetches where the next pass will
// read; the per-block scales of a group become one vector of (dw*dx, mw*sx)
// pairs, whose even lanes are broadcast to the lanes holding each block's
// integer sums.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "duet/block_formats.h"
#include "kernels/avx512_intrinsics.h"
#include "kernels/prefetch.h"
#include "kernels/qgemv_paths.h"

namespace duet::onednn::detail {
namespace {

constexpr int64_t kBlock = duet::blocks::kQK;
constexpr int kGroup = 4;  // blocks per group
constexpr int kRows = 4;   // rows per pass; 4 keeps every accumulator in registers

// The first n 16-bit words at p (n ≤ 0: none), zeros after. Masked-off
// words are not read, so a group cut short by the end of a row stays inside it.
__m512i load_words(const uint8_t* p, int n) {
  if (n >= 32) return _mm512_loadu_si512(p);
  if (n <= 0) return _mm512_setzero_si512();
  return _mm512_maskz_loadu_epi16(static_cast<__mmask32>((uint32_t{1} << n) - 1), p);
}

// A 512-bit index vector for the element permutes (vpermt2w/d, vpermw/d):
// element i of the result is element idx[i] of the first source, or
// idx[i] - N of the second where N elements fill a vector.
template <class E>
struct PermIndex {
  alignas(64) E idx[64 / sizeof(E)];
  __m512i load() const { return _mm512_load_si512(idx); }
};

// `count` runs of `len` elements, run j starting at element first + j * stride,
// each element repeated `times` times.
template <class E>
constexpr PermIndex<E> runs(int count, int len, int first, int stride, int times = 1) {
  PermIndex<E> p{};
  int i = 0;
  for (int j = 0; j < count; ++j) {
    for (int e = 0; e < len; ++e) {
      for (int r = 0; r < times; ++r) p.idx[i++] = static_cast<E>(first + j * stride + e);
    }
  }
  return p;
}

// Where a group's parts lie. Every ggml block is a whole number of 16-bit
// words (q4_0 9, q4_1 10, q8_0 17), so element permutes pick any part of every
// block of a group out of its raw bytes: a group costs two or three vector
// loads and one permute per part, instead of a load (or a gather) per block
// and part. Scales come out as 8 f16: (d, m) per block for q4_1, d twice for
// the others.
template <DType T>
struct Layout;
// Offsets and lengths in the permutes' elements, 16- or 32-bit words of
// duet/block_formats.h's structs.
constexpr int w16(size_t bytes) { return static_cast<int>(bytes / 2); }
constexpr int w32(size_t bytes) { return static_cast<int>(bytes / 4); }

template <>
struct Layout<DType::kQ4_0> {  // {d, qs[16]}: word permutes
  using B = duet::blocks::BlockQ4_0;
  static constexpr int kBytes = sizeof(B);
  static constexpr PermIndex<uint16_t> kQuants =
      runs<uint16_t>(kGroup, w16(sizeof(B::qs)), w16(offsetof(B, qs)), w16(sizeof(B)));
  static constexpr PermIndex<uint16_t> kScales =
      runs<uint16_t>(kGroup, 1, w16(offsetof(B, d)), w16(sizeof(B)), 2);
};
template <>
struct Layout<DType::kQ4_1> {  // {d, m, qs[16]}: 5 dwords, so dword permutes (one uop, not two)
  using B = duet::blocks::BlockQ4_1;
  static constexpr int kBytes = sizeof(B);
  static constexpr PermIndex<uint32_t> kQuants =
      runs<uint32_t>(kGroup, w32(sizeof(B::qs)), w32(offsetof(B, qs)), w32(sizeof(B)));
  static constexpr PermIndex<uint32_t> kScales =
      runs<uint32_t>(kGroup, 1, w32(offsetof(B, d)), w32(sizeof(B)));
};
template <>
struct Layout<DType::kQ8_0> {  // {d, qs[32]}: quants by plain 32-byte loads (load_group)
  using B = duet::blocks::BlockQ8_0;
  static constexpr int kBytes = sizeof(B);
  static constexpr PermIndex<uint16_t> kScales =
      runs<uint16_t>(kGroup, 1, w16(offsetof(B, d)), w16(sizeof(B)), 2);
};

// Index vectors, loaded once per kernel call.
template <DType T>
struct GroupIndex {
  __m512i quants = quant_index();
  __m512i scales = Layout<T>::kScales.load();

  static __m512i quant_index() {
    if constexpr (T == DType::kQ8_0) {
      return _mm512_setzero_si512();  // unused
    } else {
      return Layout<T>::kQuants.load();
    }
  }
};

// A group of up to four weight blocks, regrouped for the dot products.
struct Group {
  __m512i q;    // q4: block j's 16 quant bytes in 128-bit lane j; q8_0: blocks 0-1
  __m512i q23;  // q8_0: blocks 2-3
  __m256 dm;    // 8 floats: (d, m) per block for q4_1, (d, -8d) for q4_0, (d, d) for q8_0
};

// q8_0 block j's 32 quants (zeros if j ≥ t).
__m256i load_q8_quants(const uint8_t* blk, int j, int t) {
  if (j >= t) return _mm256_setzero_si256();
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(
      blk + j * Layout<DType::kQ8_0>::kBytes + offsetof(duet::blocks::BlockQ8_0, qs)));
}

// The first t blocks of the group at blk; the rest read as zeros.
template <DType T>
Group load_group(const uint8_t* blk, int t, const GroupIndex<T>& index) {
  const int words = t * Layout<T>::kBytes / 2;
  const __m512i w0 = load_words(blk, words);
  const __m512i w1 = load_words(blk + 64, words - 32);
  Group g;
  __m128i scales;
  if constexpr (T == DType::kQ4_1) {
    g.q = _mm512_permutex2var_epi32(w0, index.quants, w1);
    scales = _mm512_castsi512_si128(_mm512_permutexvar_epi32(index.scales, w0));
  } else {
    scales = _mm512_castsi512_si128(_mm512_permutex2var_epi16(w0, index.scales, w1));
  }
  if constexpr (T == DType::kQ4_0) g.q = _mm512_permutex2var_epi16(w0, index.quants, w1);
  if constexpr (T == DType::kQ8_0) {
    // 32-byte runs: two loads and an insert beat a two-uop word permute.
    g.q = _mm512_inserti64x4(_mm512_castsi256_si512(load_q8_quants(blk, 0, t)),
                             load_q8_quants(blk, 1, t), 1);
    g.q23 = _mm512_inserti64x4(_mm512_castsi256_si512(load_q8_quants(blk, 2, t)),
                               load_q8_quants(blk, 3, t), 1);
  }
  g.dm = _mm256_cvtph_ps(scales);
  // q4_0 is q4_1 with the minimum fixed at -8d: d*(q - 8) = d*q + (-8d).
  if constexpr (T == DType::kQ4_0)
    g.dm = _mm256_mul_ps(g.dm, _mm256_setr_ps(1, -8, 1, -8, 1, -8, 1, -8));
  return g;
}

// Prefetches the same group into L1 `near` bytes on and into L2 `far` bytes
// on, where later passes over R rows read. The hardware prefetchers follow
// one stream well but lag on R interleaved ones; on a matrix streamed from
// L3 or DRAM the L1 prefetch one pass ahead is worth about 40%.
template <DType T>
void prefetch_ahead(const uint8_t* blk, int64_t near, int64_t far) {
  constexpr int64_t kBytes = kGroup * Layout<T>::kBytes;
  prefetch_lines<CacheLevel::kL1>(blk + near, kBytes);
  prefetch_lines<CacheLevel::kL2>(blk + far, kBytes);
}

// Broadcasts even lanes of p (each block's dw*dx) to the lanes holding that
// block's integer sums, as `index` maps them.
__m512 block_scales(__m256 p, __m512i index) {
  return _mm512_permutexvar_ps(index, _mm512_castps256_ps512(p));
}

// acc + Σ u1*s1 + u2*s2 per 32-bit lane (4 byte products each), u unsigned ≤ 15.
__m512i dot2_q4(__m512i acc, __m512i u1, __m512i s1, __m512i u2, __m512i s2) {
#if DUET_QGEMV_VNNI
  return _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(acc, u1, s1), u2, s2);
#else
  // Adding in 16 bits is safe: four products of 15 * 127 stay far below 2^15.
  const __m512i p = _mm512_add_epi16(_mm512_maddubs_epi16(u1, s1), _mm512_maddubs_epi16(u2, s2));
  return _mm512_add_epi32(acc, _mm512_madd_epi16(p, _mm512_set1_epi16(1)));
#endif
}

// The running sum of a two-term product before its second term: 256*Σ(w*q).
__m512i times256(__m512i sums) { return _mm512_slli_epi32(sums, 8); }

// y[r0 .. r0+R) for q4_0 / q4_1, activations of `Terms` terms.
template <DType T, int R, int Terms>
void rows_q4(const GemvArgs& a, int64_t r0) {
  const int64_t nb = a.xq->blocks();
  const int8_t* qx = a.xq->q();
  const int8_t* qx_lo = a.xq->q_lo();
  const float* sx = a.xq->scales();
  const uint8_t* row[R];
  __m512 acc[R];
  __m256 acc_min[R];
  for (int r = 0; r < R; ++r) {
    row[r] = a.w + (r0 + r) * a.row_bytes;
    acc[r] = _mm512_setzero_ps();
    acc_min[r] = _mm256_setzero_ps();
  }
  const int64_t near = R * a.row_bytes, far = far_prefetch_bytes(near);
  const GroupIndex<T> index;
  const __m512i nibble = _mm512_set1_epi8(0x0f);
  // Activations of 4 blocks, [x0 x1 x2 x3] of 32 bytes each, regrouped as the
  // low-nibble halves [x0[0:16] x1[0:16] x2[0:16] x3[0:16]] and high halves.
  const __m512i low_halves = _mm512_setr_epi64(0, 1, 4, 5, 8, 9, 12, 13);
  const __m512i high_halves = _mm512_setr_epi64(2, 3, 6, 7, 10, 11, 14, 15);
  const __m512i scale_index = _mm512_setr_epi32(0, 0, 0, 0, 2, 2, 2, 2, 4, 4, 4, 4, 6, 6, 6, 6);

  auto group = [&](int64_t b, int t) __attribute__((always_inline)) {
    // The activation buffer is zero-padded to whole groups: full loads are safe.
    const __m512i x01 = _mm512_load_si512(qx + b * kBlock);
    const __m512i x23 = _mm512_load_si512(qx + b * kBlock + 64);
    const __m512i xlo = _mm512_permutex2var_epi64(x01, low_halves, x23);
    const __m512i xhi = _mm512_permutex2var_epi64(x01, high_halves, x23);
    __m512i xlo2 = xlo;  // the second term's, when there is one
    __m512i xhi2 = xhi;
    if constexpr (Terms == 2) {
      const __m512i y01 = _mm512_load_si512(qx_lo + b * kBlock);
      const __m512i y23 = _mm512_load_si512(qx_lo + b * kBlock + 64);
      xlo2 = _mm512_permutex2var_epi64(y01, low_halves, y23);
      xhi2 = _mm512_permutex2var_epi64(y01, high_halves, y23);
    }
    const __m256 xs = _mm256_load_ps(sx + 2 * b);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const uint8_t* blk = row[r] + b * Layout<T>::kBytes;
      prefetch_ahead<T>(blk, near, far);
      const Group g = load_group<T>(blk, t, index);
      const __m512i lo = _mm512_and_si512(g.q, nibble);
      const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(g.q, 4), nibble);
      __m512i sums = dot2_q4(_mm512_setzero_si512(), lo, xlo, hi, xhi);
      if constexpr (Terms == 2) sums = dot2_q4(times256(sums), lo, xlo2, hi, xhi2);
      const __m256 p = _mm256_mul_ps(g.dm, xs);
      // Odd lanes of p are the mw*sx terms; even lanes of acc_min stay zero.
      acc_min[r] = _mm256_mask_add_ps(acc_min[r], 0xaa, acc_min[r], p);
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), block_scales(p, scale_index), acc[r]);
    }
  };
  int64_t b = 0;
  for (; b + kGroup <= nb; b += kGroup) group(b, kGroup);
  if (b < nb) group(b, static_cast<int>(nb - b));
  for (int r = 0; r < R; ++r) {
    a.y[r0 + r] =
        _mm512_reduce_add_ps(acc[r]) + _mm512_reduce_add_ps(_mm512_castps256_ps512(acc_min[r]));
  }
}

#if DUET_QGEMV_VNNI
// vpdpbusd multiplies unsigned by signed bytes. w + 128 (w xor 0x80) is
// unsigned, and Σ(w+128)x - 128Σx = Σwx exactly in 32 bits; the -128Σx term
// depends only on x, so callers compute it once (q8_bias) for all rows.
__m512i q8_bias(__m512i x) {
  return _mm512_sub_epi32(_mm512_setzero_si512(),
                          _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(-128), x));
}
// The same correction as Q8Activations stores it (q_bias), for 64 values.
__m512i q8_bias_at(const int32_t* bias) { return _mm512_load_si512(bias); }
// A q8_0 weight vector in the form the byte products take it: made once per
// weight group and used against any number of activation vectors.
struct Q8Weights {
  __m512i u;  // w + 128
};
Q8Weights q8_weights(__m512i w) { return {_mm512_xor_si512(w, _mm512_set1_epi8(-128))}; }
// start + Σ w*x per 32-bit lane, where start includes x's q8_bias.
__m512i dot_q8(const Q8Weights& w, __m512i x, __m512i start) {
  return _mm512_dpbusd_epi32(start, w.u, x);
}
#else
__m512i q8_bias(__m512i) { return _mm512_setzero_si512(); }
__m512i q8_bias_at(const int32_t*) { return _mm512_setzero_si512(); }
// vpmaddubsw multiplies unsigned by signed bytes: |w| * (x with w's sign).
struct Q8Weights {
  __m512i magnitude;  // |w|
  __mmask64 negative;
};
Q8Weights q8_weights(__m512i w) { return {_mm512_abs_epi8(w), _mm512_movepi8_mask(w)}; }
// start + Σ w*x per 32-bit lane. Pairs stay within int16: 2 * 128 * 127 <
// 2^15 (x is never -128).
__m512i dot_q8(const Q8Weights& w, __m512i x, __m512i start) {
  const __m512i sx = _mm512_mask_sub_epi8(x, w.negative, _mm512_setzero_si512(), x);
  return _mm512_add_epi32(
      start, _mm512_madd_epi16(_mm512_maddubs_epi16(w.magnitude, sx), _mm512_set1_epi16(1)));
}
#endif

template <int R, int Terms>
void rows_q8_0(const GemvArgs& a, int64_t r0) {
  constexpr DType T = DType::kQ8_0;
  const int64_t nb = a.xq->blocks();
  const int8_t* qx = a.xq->q();
  const int8_t* qx_lo = a.xq->q_lo();
  const float* sx = a.xq->scales();
  const uint8_t* row[R];
  __m512 acc[R];
  for (int r = 0; r < R; ++r) {
    row[r] = a.w + (r0 + r) * a.row_bytes;
    acc[r] = _mm512_setzero_ps();
  }
  const int64_t near = R * a.row_bytes, far = far_prefetch_bytes(near);
  const GroupIndex<T> index;
  const __m512i scale_index01 = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2);
  const __m512i scale_index23 = _mm512_setr_epi32(4, 4, 4, 4, 4, 4, 4, 4, 6, 6, 6, 6, 6, 6, 6, 6);

  auto group = [&](int64_t b, int t) __attribute__((always_inline)) {
    const __m512i x01 = _mm512_load_si512(qx + b * kBlock);
    const __m512i x23 = _mm512_load_si512(qx + b * kBlock + 64);
    const __m512i bias01 = q8_bias(x01);
    const __m512i bias23 = q8_bias(x23);
    __m512i y01 = x01, y23 = x23, bias_y01 = bias01, bias_y23 = bias23;  // the second term's
    if constexpr (Terms == 2) {
      y01 = _mm512_load_si512(qx_lo + b * kBlock);
      y23 = _mm512_load_si512(qx_lo + b * kBlock + 64);
      bias_y01 = q8_bias(y01);
      bias_y23 = q8_bias(y23);
    }
    const __m256 xs = _mm256_load_ps(sx + 2 * b);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      // Blocks past t load as zeros and have zero scales.
      const uint8_t* blk = row[r] + b * Layout<T>::kBytes;
      prefetch_ahead<T>(blk, near, far);
      const Group g = load_group<T>(blk, t, index);
      const Q8Weights w01 = q8_weights(g.q);
      __m512i s01 = dot_q8(w01, x01, bias01);
      if constexpr (Terms == 2) s01 = dot_q8(w01, y01, _mm512_add_epi32(times256(s01), bias_y01));
      const __m256 p = _mm256_mul_ps(g.dm, xs);
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s01), block_scales(p, scale_index01), acc[r]);
      if (t > 2) {  // a short last group often has just one pair (k = 576: 18 blocks)
        const Q8Weights w23 = q8_weights(g.q23);
        __m512i s23 = dot_q8(w23, x23, bias23);
        if constexpr (Terms == 2) s23 = dot_q8(w23, y23, _mm512_add_epi32(times256(s23), bias_y23));
        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s23), block_scales(p, scale_index23), acc[r]);
      }
    }
  };
  int64_t b = 0;
  for (; b + kGroup <= nb; b += kGroup) group(b, kGroup);
  if (b < nb) group(b, static_cast<int>(nb - b));
  for (int r = 0; r < R; ++r) a.y[r0 + r] = _mm512_reduce_add_ps(acc[r]);
}

// Rows kRows at a time, then the rest one by one.
template <void (*RowsN)(const GemvArgs&, int64_t), void (*Rows1)(const GemvArgs&, int64_t)>
void all_rows(const GemvArgs& a) {
  int64_t r = a.row_begin;
  for (; r + kRows <= a.row_end; r += kRows) RowsN(a, r);
  for (; r < a.row_end; ++r) Rows1(a, r);
}

#if !DUET_QGEMV_VNNI
template <DType T>
__m512 load_weights(const uint8_t* p, __mmask16 m) {
  if constexpr (T == DType::kF32) return _mm512_maskz_loadu_ps(m, p);
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
}

// f32 / f16 weights: 16 columns per step, the last step masked.
template <DType T, int R>
void rows_float(const GemvArgs& a, int64_t r0) {
  constexpr int64_t elem = T == DType::kF32 ? 4 : 2;
  const uint8_t* row[R];
  __m512 acc[R];
  for (int r = 0; r < R; ++r) {
    row[r] = a.w + (r0 + r) * a.row_bytes;
    acc[r] = _mm512_setzero_ps();
  }
  for (int64_t c = 0; c < a.k; c += 16) {
    const auto m = static_cast<__mmask16>(a.k - c >= 16 ? 0xffff : (1u << (a.k - c)) - 1);
    const __m512 xv = _mm512_maskz_loadu_ps(m, a.x + c);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r)
      acc[r] = _mm512_fmadd_ps(load_weights<T>(row[r] + c * elem, m), xv, acc[r]);
  }
  for (int r = 0; r < R; ++r) a.y[r0 + r] = _mm512_reduce_add_ps(acc[r]);
}
#endif

template <int Terms>
bool gemv_quantized_terms(const GemvArgs& a) {
  switch (a.wtype) {
    case DType::kQ4_0:
      all_rows<rows_q4<DType::kQ4_0, kRows, Terms>, rows_q4<DType::kQ4_0, 1, Terms>>(a);
      return true;
    case DType::kQ4_1:
      all_rows<rows_q4<DType::kQ4_1, kRows, Terms>, rows_q4<DType::kQ4_1, 1, Terms>>(a);
      return true;
    case DType::kQ8_0:
      all_rows<rows_q8_0<kRows, Terms>, rows_q8_0<1, Terms>>(a);
      return true;
    default:
      return false;
  }
}

// The quantized types' kernels; false for f32/f16.
bool gemv_quantized(const GemvArgs& a) {
  if (a.wtype == DType::kF32 || a.wtype == DType::kF16) return false;  // (xq may be null)
  return a.xq->terms() == 2 ? gemv_quantized_terms<2>(a) : gemv_quantized_terms<1>(a);
}

// Many vectors at once (gemv_batch). One weight row against NV activation
// vectors: each group of the row is loaded and unpacked once for all of them,
// and each vector's part is then the one-vector kernels' arithmetic,
// operation for operation (the same integer lane sums, the same float
// products and additions in the same order), so every result is bit-identical
// to theirs. The activations' per-vector work that those kernels share among
// rows (regrouping, the q8 correction) comes precomputed from Q8Activations.
constexpr int kMaxVectors = 8;

template <DType T, int NV, int Terms>
void row_q4_many(const GemvArgs& a, int64_t r, int64_t v0) {
  const int64_t nb = a.xq[v0].blocks();
  const uint8_t* row = a.w + r * a.row_bytes;
  const int8_t* xg[NV];
  const int8_t* xg_lo[NV];
  const float* sx[NV];
  __m512 acc[NV];
  __m256 acc_min[NV];
  for (int v = 0; v < NV; ++v) {
    const Q8Activations& x = a.xq[v0 + v];
    xg[v] = x.q_regrouped();
    xg_lo[v] = x.q_lo_regrouped();
    sx[v] = x.scales();
    acc[v] = _mm512_setzero_ps();
    acc_min[v] = _mm256_setzero_ps();
  }
  const GroupIndex<T> index;
  const __m512i nibble = _mm512_set1_epi8(0x0f);
  const __m512i scale_index = _mm512_setr_epi32(0, 0, 0, 0, 2, 2, 2, 2, 4, 4, 4, 4, 6, 6, 6, 6);

  auto group = [&](int64_t b, int t) __attribute__((always_inline)) {
    const uint8_t* blk = row + b * Layout<T>::kBytes;
    prefetch_ahead<T>(blk, a.row_bytes, 2 * a.row_bytes);  // the next rows' passes
    const Group g = load_group<T>(blk, t, index);
    const __m512i lo = _mm512_and_si512(g.q, nibble);
    const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(g.q, 4), nibble);
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      const int8_t* xb = xg[v] + b * kBlock;
      __m512i sums = dot2_q4(_mm512_setzero_si512(), lo, _mm512_load_si512(xb), hi,
                             _mm512_load_si512(xb + 64));
      if constexpr (Terms == 2) {
        const int8_t* yb = xg_lo[v] + b * kBlock;
        sums = dot2_q4(times256(sums), lo, _mm512_load_si512(yb), hi, _mm512_load_si512(yb + 64));
      }
      const __m256 p = _mm256_mul_ps(g.dm, _mm256_load_ps(sx[v] + 2 * b));
      acc_min[v] = _mm256_mask_add_ps(acc_min[v], 0xaa, acc_min[v], p);
      acc[v] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), block_scales(p, scale_index), acc[v]);
    }
  };
  int64_t b = 0;
  for (; b + kGroup <= nb; b += kGroup) group(b, kGroup);
  if (b < nb) group(b, static_cast<int>(nb - b));
  for (int v = 0; v < NV; ++v) {
    a.y[(v0 + v) * a.ldy + r] =
        _mm512_reduce_add_ps(acc[v]) + _mm512_reduce_add_ps(_mm512_castps256_ps512(acc_min[v]));
  }
}

template <int NV, int Terms>
void row_q8_0_many(const GemvArgs& a, int64_t r, int64_t v0) {
  constexpr DType T = DType::kQ8_0;
  const int64_t nb = a.xq[v0].blocks();
  const uint8_t* row = a.w + r * a.row_bytes;
  const Q8Activations* xq = a.xq + v0;
  __m512 acc[NV];
  for (int v = 0; v < NV; ++v) acc[v] = _mm512_setzero_ps();
  const GroupIndex<T> index;
  const __m512i scale_index01 = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2);
  const __m512i scale_index23 = _mm512_setr_epi32(4, 4, 4, 4, 4, 4, 4, 4, 6, 6, 6, 6, 6, 6, 6, 6);

  // One pair of blocks (j = 0: blocks 0-1 of the group, 1: blocks 2-3) of
  // vector v: its integer lane sums, both terms.
  auto pair_sums = [&](const Q8Weights& w, int v, int64_t b, int j) __attribute__((always_inline)) {
    const int64_t at = b * kBlock + 64 * j;
    __m512i s = dot_q8(w, _mm512_load_si512(xq[v].q() + at), q8_bias_at(xq[v].q_bias() + at / 4));
    if constexpr (Terms == 2) {
      s = dot_q8(w, _mm512_load_si512(xq[v].q_lo() + at),
                 _mm512_add_epi32(times256(s), q8_bias_at(xq[v].q_lo_bias() + at / 4)));
    }
    return s;
  };
  auto group = [&](int64_t b, int t) __attribute__((always_inline)) {
    const uint8_t* blk = row + b * Layout<T>::kBytes;
    prefetch_ahead<T>(blk, a.row_bytes, 2 * a.row_bytes);  // the next rows' passes
    const Group g = load_group<T>(blk, t, index);
    const Q8Weights w01 = q8_weights(g.q);
    const Q8Weights w23 = q8_weights(g.q23);
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      const __m256 p = _mm256_mul_ps(g.dm, _mm256_load_ps(xq[v].scales() + 2 * b));
      acc[v] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(pair_sums(w01, v, b, 0)),
                               block_scales(p, scale_index01), acc[v]);
      if (t > 2) {
        acc[v] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(pair_sums(w23, v, b, 1)),
                                 block_scales(p, scale_index23), acc[v]);
      }
    }
  };
  int64_t b = 0;
  for (; b + kGroup <= nb; b += kGroup) group(b, kGroup);
  if (b < nb) group(b, static_cast<int>(nb - b));
  for (int v = 0; v < NV; ++v) a.y[(v0 + v) * a.ldy + r] = _mm512_reduce_add_ps(acc[v]);
}

// Rows [row_begin, row_end) against vectors [v0, v0 + NV), all of `Terms`.
template <int NV, int Terms>
void rows_many(const GemvArgs& a, int64_t v0) {
  switch (a.wtype) {
    case DType::kQ4_0:
      for (int64_t r = a.row_begin; r < a.row_end; ++r)
        row_q4_many<DType::kQ4_0, NV, Terms>(a, r, v0);
      return;
    case DType::kQ4_1:
      for (int64_t r = a.row_begin; r < a.row_end; ++r)
        row_q4_many<DType::kQ4_1, NV, Terms>(a, r, v0);
      return;
    default:
      for (int64_t r = a.row_begin; r < a.row_end; ++r) row_q8_0_many<NV, Terms>(a, r, v0);
      return;
  }
}

// `count` vectors from v0, all of `Terms`, in as few passes of at most
// kMaxVectors as there can be, of sizes that differ by at most one (9 = 5 +
// 4: a pass of one vector more costs far less than a pass of its own). A
// single vector takes the one-vector kernel (kRows rows at a time).
template <int Terms>
void vectors_many(const GemvArgs& a, int64_t v0, int64_t count) {
  if (count == 1) {
    GemvArgs one = a;
    one.xq = a.xq + v0;
    one.y = a.y + v0 * a.ldy;
    gemv_quantized_terms<Terms>(one);
    return;
  }
  const int64_t passes = (count + kMaxVectors - 1) / kMaxVectors;
  for (int64_t p = 0; p < passes; ++p) {
    const int64_t nv = count / passes + (p < count % passes ? 1 : 0);
    switch (nv) {
      case 2:
        rows_many<2, Terms>(a, v0);
        break;
      case 3:
        rows_many<3, Terms>(a, v0);
        break;
      case 4:
        rows_many<4, Terms>(a, v0);
        break;
      case 5:
        rows_many<5, Terms>(a, v0);
        break;
      case 6:
        rows_many<6, Terms>(a, v0);
        break;
      case 7:
        rows_many<7, Terms>(a, v0);
        break;
      default:
        rows_many<kMaxVectors, Terms>(a, v0);
        break;
    }
    v0 += nv;
  }
}

bool gemv_quantized_many(const GemvArgs& a) {
  if (a.wtype != DType::kQ4_0 && a.wtype != DType::kQ4_1 && a.wtype != DType::kQ8_0) return false;
  // Runs of vectors with one number of terms (a caller may mix them).
  for (int64_t v = 0; v < a.n;) {
    const int terms = a.xq[v].terms();
    int64_t end = v + 1;
    while (end < a.n && a.xq[end].terms() == terms) ++end;
    if (terms == 2) {
      vectors_many<2>(a, v, end - v);
    } else {
      vectors_many<1>(a, v, end - v);
    }
    v = end;
  }
  return true;
}

}  // namespace

#if DUET_QGEMV_VNNI
void gemv_avx512_vnni(const GemvArgs& a) {
  // f32/f16 have no byte products: the kAvx512 kernels are the same.
  if (!gemv_quantized(a)) gemv_avx512(a);
}

bool gemv_many_avx512_vnni(const GemvArgs& a) { return gemv_quantized_many(a); }
#else
bool gemv_many_avx512(const GemvArgs& a) { return gemv_quantized_many(a); }

void gemv_avx512(const GemvArgs& a) {
  if (gemv_quantized(a)) return;
  if (a.wtype == DType::kF32) {
    all_rows<rows_float<DType::kF32, kRows>, rows_float<DType::kF32, 1>>(a);
  } else {
    all_rows<rows_float<DType::kF16, kRows>, rows_float<DType::kF16, 1>>(a);
  }
}

namespace {

// out[2j] = a[j], out[2j + 1] = b[j] for j < count (≤ 16).
void store_pairs(__m512 a, __m512 b, int64_t count, float* out) {
  const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i hi = _mm512_add_epi32(lo, _mm512_set1_epi32(8));
  const int64_t floats = 2 * count;
  const auto first = static_cast<__mmask16>(floats >= 16 ? 0xffff : (1u << floats) - 1);
  const auto second = static_cast<__mmask16>(floats <= 16 ? 0 : (1u << (floats - 16)) - 1);
  _mm512_mask_storeu_ps(out, first, _mm512_permutex2var_ps(a, lo, b));
  _mm512_mask_storeu_ps(out + 16, second, _mm512_permutex2var_ps(a, hi, b));
}

// v where it is finite, else 0 (|v| ≥ inf or unordered: NaN, +inf, -inf).
__m512 finite_or_zero(__m512 v) {
  const __mmask16 not_finite = _mm512_cmp_ps_mask(
      _mm512_abs_ps(v), _mm512_set1_ps(std::numeric_limits<float>::infinity()), _CMP_NLT_UQ);
  return _mm512_maskz_mov_ps(static_cast<__mmask16>(~not_finite), v);
}

// Σ of v's 16 lanes, wrapping as vector adds do, in every lane of the
// result. (GCC's _mm512_reduce_add_epi32 adds in int, which overflows,
// undefined, on the values a block holding an inf or a NaN converts to.)
__m128i sum_lanes_epi32(__m512i v) {
  const __m256i a = _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
  __m128i b = _mm_add_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
  b = _mm_add_epi32(b, _mm_shuffle_epi32(b, 0x4e));
  return _mm_add_epi32(b, _mm_shuffle_epi32(b, 0xb1));
}

// The largest of v's 16 lanes, by vmaxps alone, in every lane of the
// result. (Clang's _mm512_reduce_max_ps assumes no NaN, which a block
// holding one breaks.)
__m128 max_lanes_ps(__m512 v) {
  const __m256 a = _mm256_max_ps(_mm512_castps512_ps256(v),
                                 _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
  __m128 b = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  b = _mm_max_ps(b, _mm_shuffle_ps(b, b, 0x4e));
  return _mm_max_ps(b, _mm_shuffle_ps(b, b, 0xb1));
}

// One group of n ≤ 16 blocks from x: qgemv.cc's definitions (quantize_scalar,
// quantize_second_term, fill_half_scales) in the same float operations, so
// the same bits. Each block is taken whole in registers — its maximum and
// its integer sums reduced across lanes at once (a maximum and an integer sum
// are exact in any order) — and only the per-block scalars go through small
// arrays, so that the 16 blocks' divisions and scales are done 16 to a
// vector. (Holding the 16 blocks' vectors in arrays until a 16-way
// reduction spilled them to the stack and reloaded them as soon as they were
// stored: on Zen 4, 2 ns a value.) The per-block maxima and sums go into
// their vectors' lanes in registers (a masked broadcast each): stored one
// lane at a time and loaded as a vector, they stalled the load until the
// stores had left (no store forwarding from 16 narrow stores to one wide
// load), 37% of this function's time in a 64-sequence decode step on Zen 4.
template <int Terms>
void quantize_group(const float* x, int64_t n, int8_t* q, int8_t* q_lo, float* scales,
                    float* half_scales) {
  const __m512 zero = _mm512_setzero_ps();
  __m512 amax = zero;  // lane j: block j's largest magnitude
  // Blocks holding an inf or a NaN (x * 0 is NaN exactly there): with two
  // terms, they get no second one.
  __mmask16 poisoned = 0;
  for (int64_t j = 0; j < n; ++j) {
    const auto lane = static_cast<__mmask16>(1u << j);
    const __m512 x0 = _mm512_loadu_ps(x + j * kBlock);
    const __m512 x1 = _mm512_loadu_ps(x + j * kBlock + 16);
    amax = _mm512_mask_broadcastss_ps(
        amax, lane, max_lanes_ps(_mm512_max_ps(_mm512_abs_ps(x0), _mm512_abs_ps(x1))));
    if constexpr (Terms == 2) {
      const __m512 p = _mm512_add_ps(_mm512_mul_ps(x0, zero), _mm512_mul_ps(x1, zero));
      if (_mm512_cmp_ps_mask(p, p, _CMP_UNORD_Q) != 0) poisoned |= lane;
    }
  }
  const __m512 d = _mm512_div_ps(amax, _mm512_set1_ps(127.0f));
  // d != 0 (true for NaN, as in the scalar code).
  const __mmask16 nonzero = _mm512_cmp_ps_mask(d, zero, _CMP_NEQ_UQ);
  alignas(64) float ds[16];
  alignas(64) float ids[16];
  alignas(64) float ids2[16];
  _mm512_store_ps(ds, d);
  _mm512_store_ps(ids, finite_or_zero(_mm512_maskz_div_ps(nonzero, _mm512_set1_ps(1.0f), d)));
  if constexpr (Terms == 2) {
    // 256 / d, or 0 where d is 0, 256 / d is not finite, or the block is
    // poisoned: no second term.
    const __m512 id2 = finite_or_zero(_mm512_maskz_div_ps(nonzero, _mm512_set1_ps(256.0f), d));
    _mm512_store_ps(ids2, _mm512_maskz_mov_ps(static_cast<__mmask16>(~poisoned), id2));
  }
  // Σ of each half block's values (with two terms, 256 q + q_lo).
  __m512i sums[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
  constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  const __m512i lo = _mm512_set1_epi32(-127);
  const __m512i hi = _mm512_set1_epi32(127);
  for (int64_t j = 0; j < n; ++j) {
    const auto lane = static_cast<__mmask16>(1u << j);
    const __m512 id = _mm512_set1_ps(ids[j]);
    for (int h = 0; h < 2; ++h) {
      const __m512 xv = _mm512_loadu_ps(x + j * kBlock + 16 * h);
      __m512i qv = _mm512_cvtps_epi32(_mm512_mul_ps(xv, id));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + j * kBlock + 16 * h),
                       _mm512_cvtsepi32_epi8(qv));
      if constexpr (Terms == 2) {
        // The steps of quantize_second_term one by one, explicitly rounded so
        // that the compiler cannot fuse them into an FMA.
        const __m512 rest = _mm512_sub_round_ps(
            xv, _mm512_mul_round_ps(_mm512_set1_ps(ds[j]), _mm512_cvtepi32_ps(qv), kRound), kRound);
        // vcvtps2dq rounds to nearest even, as the portable code's adder does.
        const __m512i v = _mm512_min_epi32(
            _mm512_max_epi32(
                _mm512_cvtps_epi32(_mm512_mul_round_ps(rest, _mm512_set1_ps(ids2[j]), kRound)), lo),
            hi);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(q_lo + j * kBlock + 16 * h),
                         _mm512_cvtepi32_epi8(v));
        qv = _mm512_add_epi32(_mm512_slli_epi32(qv, 8), v);
      }
      sums[h] = _mm512_mask_broadcastd_epi32(sums[h], lane, sum_lanes_epi32(qv));
    }
  }
  __m512 unit = d;
  // 1/256: exact, a power-of-two scaling.
  if constexpr (Terms == 2) unit = _mm512_mul_ps(d, _mm512_set1_ps(1.0f / 256.0f));
  store_pairs(unit, _mm512_mul_ps(unit, _mm512_cvtepi32_ps(_mm512_add_epi32(sums[0], sums[1]))), n,
              scales);
  store_pairs(_mm512_mul_ps(unit, _mm512_cvtepi32_ps(sums[0])),
              _mm512_mul_ps(unit, _mm512_cvtepi32_ps(sums[1])), n, half_scales);
}

}  // namespace

void quantize_terms_avx512(const float* x, int64_t k, int terms, int8_t* q, int8_t* q_lo,
                           float* scales, float* half_scales) {
  for (int64_t b = 0; b < k / kBlock; b += 16) {
    const int64_t n = std::min<int64_t>(16, k / kBlock - b);
    if (terms == 2) {
      quantize_group<2>(x + b * kBlock, n, q + b * kBlock, q_lo + b * kBlock, scales + 2 * b,
                        half_scales + 2 * b);
    } else {
      quantize_group<1>(x + b * kBlock, n, q + b * kBlock, nullptr, scales + 2 * b,
                        half_scales + 2 * b);
    }
  }
}
#endif

}  // namespace duet::onednn::detail
