// Every kernel body below is an always-inline template over the vector
// width W; thin wrappers that carry a `target` attribute inline it, so each
// body is compiled once per instruction set, at that set's natural width,
// while everything else in this file (and any out-of-line helper such as
// std::exp) stays baseline x86-64. Built with -ffp-contract=fast so that
// a * b + c becomes one FMA where the target has it. Decode attention's two
// memory-bound halves have intrinsics kernels on AVX2 and AVX-512
// (kernels/attend_avx2.h, attend_avx512.h); their generic bodies here serve
// the baseline path.
#include "vector_kernels.h"

#include <cmath>
#include <cstddef>
#include <cstring>

#include "duet/block_formats.h"
#include "duet/quant.h"
#include "kernels/attend_avx2.h"
#include "kernels/attend_avx512.h"
#include "kernels/attend_tiles.h"
#include "kernels/qgemv_paths.h"

// Vector types are passed by value only between always-inline functions of
// this file, so the ABI change GCC warns about never applies.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace duet::onednn {
namespace {

// The 32-element block formats, as duet/block_formats.h lays them out.
using duet::blocks::BlockQ4_0;
using duet::blocks::BlockQ4_1;
using duet::blocks::BlockQ8_0;
constexpr int kQK = duet::blocks::kQK;

#define DUET_INLINE __attribute__((always_inline)) inline

// The vector types of width W. Spelled out per width: GCC drops a
// vector_size whose size depends on a template parameter.
template <int W>
struct Vec;
#define DUET_VEC(W)                                           \
  template <>                                                 \
  struct Vec<W> {                                             \
    using F = float __attribute__((vector_size(4 * W)));      \
    using I = int32_t __attribute__((vector_size(4 * W)));    \
    using U = uint32_t __attribute__((vector_size(4 * W)));   \
    using U16 = uint16_t __attribute__((vector_size(2 * W))); \
    using U8 = uint8_t __attribute__((vector_size(W)));       \
    using I8 = int8_t __attribute__((vector_size(W)));        \
    using D = double __attribute__((vector_size(8 * W)));     \
  };
DUET_VEC(4)
DUET_VEC(8)
DUET_VEC(16)
#undef DUET_VEC

template <int W>
DUET_INLINE typename Vec<W>::F load(const float* p) {
  typename Vec<W>::F v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <int W>
DUET_INLINE void store(float* p, typename Vec<W>::F v) {
  std::memcpy(p, &v, sizeof v);
}

template <int W>
DUET_INLINE typename Vec<W>::F splat(float x) {
  return typename Vec<W>::F{} + x;
}

// W finite binary16 values, exactly: the exponent and mantissa bits moved
// into place as a float scaled by 2^-112, which one multiply undoes (also
// for subnormals), then the sign.
template <int W>
DUET_INLINE typename Vec<W>::F load_f16(const uint16_t* p) {
  using U = typename Vec<W>::U;
  using F = typename Vec<W>::F;
  typename Vec<W>::U16 h;
  std::memcpy(&h, p, sizeof h);
  const U u = __builtin_convertvector(h, U);
  const F magnitude = __builtin_bit_cast(F, (u & 0x7fffu) << 13) * 0x1p112f;
  return __builtin_bit_cast(F, __builtin_bit_cast(U, magnitude) | ((u & 0x8000u) << 16));
}

// W bytes widened to floats (through int32, which vectorizes).
template <int W, typename Bytes>
DUET_INLINE typename Vec<W>::F widen(Bytes b) {
  return __builtin_convertvector(__builtin_convertvector(b, typename Vec<W>::I),
                                 typename Vec<W>::F);
}

template <int W>
DUET_INLINE float hsum(typename Vec<W>::F v) {
  float s = 0.0f;
  for (int i = 0; i < W; ++i) s += v[i];
  return s;
}

// The same sum as a tree of halvings (a few shuffles, not W extractions),
// for the inner loop of attention; the order of additions differs.
template <int W>
DUET_INLINE float hsum_tree(typename Vec<W>::F v) {
  if constexpr (W == 4) {
    return (v[0] + v[2]) + (v[1] + v[3]);
  } else {
    typename Vec<W / 2>::F lo, hi;
    std::memcpy(&lo, &v, sizeof lo);
    std::memcpy(&hi, reinterpret_cast<const char*>(&v) + sizeof lo, sizeof hi);
    return hsum_tree<W / 2>(lo + hi);
  }
}

template <int W>
DUET_INLINE float hmax(typename Vec<W>::F v) {
  float m = v[0];
  for (int i = 1; i < W; ++i) m = v[i] > m ? v[i] : m;
  return m;
}

// e^x with a relative error of about 2 ulp (Cephes expf): x = n ln 2 + r
// with |r| ≤ ln2 / 2, a degree-6 polynomial for e^r, and 2^n put into the
// exponent bits. Inputs are clamped to [-87, 88], so the result is always a
// normal float: callers needing an exact 0 for a masked lane set it.
template <int W>
DUET_INLINE typename Vec<W>::F exp_v(typename Vec<W>::F x) {
  using F = typename Vec<W>::F;
  x = x < splat<W>(-87.0f) ? splat<W>(-87.0f) : x;
  x = x > splat<W>(88.0f) ? splat<W>(88.0f) : x;
  // Round x / ln 2 to an integer by adding and removing 1.5 * 2^23.
  const F n = (x * 1.44269504088896341f + 0x1.8p23f) - 0x1.8p23f;
  F r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  F p = splat<W>(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const F y = p * r * r + r + 1.0f;
  const typename Vec<W>::I bits = (__builtin_convertvector(n, typename Vec<W>::I) + 127) << 23;
  return y * __builtin_bit_cast(F, bits);
}

template <int W>
DUET_INLINE float max_of(const float* s, int64_t n) {
  const int64_t whole = n / W * W;
  float m = -INFINITY;
  if (whole > 0) {
    typename Vec<W>::F vmax = load<W>(s);
    for (int64_t p = W; p < whole; p += W) {
      const typename Vec<W>::F x = load<W>(s + p);
      vmax = x > vmax ? x : vmax;
    }
    m = hmax<W>(vmax);
  }
  for (int64_t p = whole; p < n; ++p) m = s[p] > m ? s[p] : m;
  return m;
}

// s[i] = exp(s[i] - m) for i < n; returns their sum.
template <int W>
DUET_INLINE float exp_shifted(float* s, int64_t n, float m) {
  const int64_t whole = n / W * W;
  typename Vec<W>::F vsum{};
  for (int64_t p = 0; p < whole; p += W) {
    const typename Vec<W>::F e = exp_v<W>(load<W>(s + p) - m);
    store<W>(s + p, e);
    vsum += e;
  }
  float sum = hsum<W>(vsum);
  for (int64_t p = whole; p < n; ++p) sum += (s[p] = std::exp(s[p] - m));
  return sum;
}

template <int W>
DUET_INLINE void softmax_body(float* s, int64_t valid, int64_t width) {
  const float inv = 1.0f / exp_shifted<W>(s, valid, max_of<W>(s, valid));
  const int64_t whole = valid / W * W;
  for (int64_t p = 0; p < whole; p += W) store<W>(s + p, load<W>(s + p) * inv);
  for (int64_t p = whole; p < valid; ++p) s[p] *= inv;
  for (int64_t p = valid; p < width; ++p) s[p] = 0.0f;
}

// The binary16 at p as a float: duet::f16_to_f32 inlined, exact for every
// input (scales are usually normal; zero, subnormal, inf and NaN are kept).
DUET_INLINE float f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof h);
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    const float mag = static_cast<float>(mant) * 0x1p-24f;
    return sign != 0 ? -mag : mag;
  }
  const uint32_t bits = exp == 0x1f ? (sign | 0x7f800000u | (mant << 13))
                                    : (sign | ((exp + 112u) << 23) | (mant << 13));
  return __builtin_bit_cast(float, bits);
}

// Elements [c, c + W) of a cache row of `T` elements (f32, f16 or q8_0
// blocks; W divides 32, so the elements lie in one block).
template <int W, DType T>
DUET_INLINE typename Vec<W>::F load_row(const uint8_t* row, int64_t c) {
  if constexpr (T == DType::kF16) {
    return load_f16<W>(reinterpret_cast<const uint16_t*>(row) + c);
  } else if constexpr (T == DType::kQ8_0) {
    const uint8_t* block = row + c / kQK * sizeof(BlockQ8_0);
    typename Vec<W>::I8 q;
    std::memcpy(&q, block + offsetof(BlockQ8_0, qs) + c % kQK, sizeof q);
    return widen<W>(q) * f16(block);
  } else {
    return load<W>(reinterpret_cast<const float*>(row) + c);
  }
}

// Prefetches the `bytes` at p into L1: the hardware prefetchers lag on the
// many short streams of a paged cache.
DUET_INLINE void prefetch(const uint8_t* p, int64_t bytes) {
  for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch(p + b);
}

// Calls fn(i, g, p) for every position i < n and KV head g, p the first
// byte of that head's elements (KV head g of position i at base + i *
// stride + g * head_bytes), a few positions' rows prefetched ahead. `fn`
// must be always_inline: it runs in the caller's instruction set.
template <class Fn>
DUET_INLINE void for_each_cached_head(const void* base, int32_t kv_heads, int64_t head_bytes,
                                      int64_t stride, int64_t n, const Fn& fn) {
  constexpr int64_t kAhead = 4;  // positions prefetched ahead
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* row = static_cast<const uint8_t*>(base) + i * stride;
    if (i + kAhead < n) prefetch(row + kAhead * stride, kv_heads * head_bytes);
    for (int64_t g = 0; g < kv_heads; ++g) fn(i, g, row + g * head_bytes);
  }
}

// Where attend widens keys: after the `count` scores, on a 64-byte line
// boundary (the slack of kv_heads * group * head_dim floats that
// VectorKernels::attend's scratch has beyond them holds the shift): a
// vector stored across two lines and read back at once costs several times
// an aligned one.
DUET_INLINE float* key_staging(float* scores, int64_t count) {
  const auto after_scores = reinterpret_cast<uintptr_t>(scores + count);
  return reinterpret_cast<float*>((after_scores + 63) & ~uintptr_t{63});
}

// scores[h * n + i] = scale * q_h · k_i (VectorKernels::attend's first half),
// each key read (and, from f16 or q8_0, widened into `staging`, head_dim
// floats) once for all query heads of its group. (Widened once per query
// head before: `attend_bench` on the AVX2 path of a Zen 4, when this body
// was that path's too (kernels/attend_avx2.h is now), f16 9.2-9.6 ->
// 7.2-7.6 ms hot, q8_0 26.9-27.4 -> 17.5-17.9.)
template <int W, DType T>
DUET_INLINE void attend_scores_body(const float* q, int32_t kv_heads, int32_t group,
                                    int32_t head_dim, float scale, const void* k, int64_t stride,
                                    int64_t n, float* scores, float* staging) {
  for_each_cached_head(
      k, kv_heads, cache_head_bytes(T, head_dim), stride,
      n, [&](int64_t i, int64_t g, const uint8_t* key) __attribute__((always_inline)) {
        const uint8_t* row = key;
        if constexpr (T != DType::kF32) {
          for (int64_t c = 0; c < head_dim; c += W) store<W>(staging + c, load_row<W, T>(key, c));
          row = reinterpret_cast<const uint8_t*>(staging);
        }
        for (int64_t h = g * group; h < (g + 1) * group; ++h) {
          const float* qh = q + h * head_dim;
          typename Vec<W>::F dot{};
          for (int64_t c = 0; c < head_dim; c += W) {
            dot += load_row<W, DType::kF32>(row, c) * load<W>(qh + c);
          }
          scores[h * n + i] = scale * hsum_tree<W>(dot);
        }
      });
}

// The online-softmax step: folds the new scores' maximum into the state,
// rescales what it holds, and turns the scores into exp(score - max).
template <int W>
DUET_INLINE void attend_softmax_body(int64_t heads, int32_t head_dim, int64_t n, float* scores,
                                     SoftmaxPart state) {
  for (int64_t h = 0; h < heads; ++h) {
    float* s = scores + h * n;
    const float m = std::fmax(state.max[h], max_of<W>(s, n));
    const float keep = std::exp(state.max[h] - m);  // 0 for a fresh state
    state.sum[h] = state.sum[h] * keep + exp_shifted<W>(s, n, m);
    state.max[h] = m;
    float* acc = state.acc + h * head_dim;
    for (int64_t c = 0; c < head_dim; c += W) store<W>(acc + c, load<W>(acc + c) * keep);
  }
}

// acc_h += Σ_i probs[h * n + i] * v_i (VectorKernels::attend's second half),
// each value read once for all query heads of its group, kValuesRun
// positions at a time from f16 and q8_0 rows: each head's sum is loaded and
// stored once per run rather than once per position (the same additions in
// the same order). `attend_bench` on the AVX2 path of a Zen 4 (this body
// then), hot /
// streamed, one position a time against four: f16 7.4-7.6 / 7.6 ms
// against 6.4-6.5 / 7.1, q8_0 17.4 / 17.7-17.8 against 15.6-16.4 / 16.0,
// but f32 rows (768 bytes) streamed 11.1 ms against 7.6: those stay one a
// time.
template <DType T>
constexpr int64_t kValuesRun = T == DType::kF32 ? 1 : 4;

template <int W, DType T>
DUET_INLINE void attend_values_body(int32_t kv_heads, int32_t group, int32_t head_dim,
                                    const void* v, int64_t stride, int64_t n, const float* probs,
                                    float* acc) {
  using F = typename Vec<W>::F;
  constexpr int64_t kRun = kValuesRun<T>;
  constexpr int64_t kAhead = 4;  // positions prefetched ahead
  const int64_t head_bytes = cache_head_bytes(T, head_dim);
  for (int64_t i0 = 0; i0 < n; i0 += kRun) {
    const int64_t m = std::min(kRun, n - i0);
    const uint8_t* rows = static_cast<const uint8_t*>(v) + i0 * stride;
    for (int64_t j = kAhead; j < std::min(kAhead + m, n - i0); ++j) {
      prefetch(rows + j * stride, kv_heads * head_bytes);
    }
    for (int64_t g = 0; g < kv_heads; ++g) {
      const uint8_t* head = rows + g * head_bytes;
      for (int64_t c = 0; c < head_dim; c += W) {
        F x[kRun] = {};
#pragma GCC unroll 4
        for (int64_t j = 0; j < kRun; ++j) {
          if (j < m) x[j] = load_row<W, T>(head + j * stride, c);
        }
        for (int64_t h = g * group; h < (g + 1) * group; ++h) {
          const float* p = probs + h * n + i0;
          float* a = acc + h * head_dim + c;
          F sum = load<W>(a);
#pragma GCC unroll 4
          for (int64_t j = 0; j < kRun; ++j) {
            if (j < m) sum += p[j] * x[j];
          }
          store<W>(a, sum);
        }
      }
    }
  }
}

template <int W, DType T>
DUET_INLINE void attend_typed(const float* q, int32_t kv_heads, int32_t group, int32_t head_dim,
                              float scale, const void* k, const void* v, int64_t stride, int64_t n,
                              float* scores, SoftmaxPart state) {
  attend_scores_body<W, T>(q, kv_heads, group, head_dim, scale, k, stride, n, scores,
                           key_staging(scores, int64_t{kv_heads} * group * n));
  attend_softmax_body<W>(int64_t{kv_heads} * group, head_dim, n, scores, state);
  attend_values_body<W, T>(kv_heads, group, head_dim, v, stride, n, scores, state.acc);
}

template <int W>
DUET_INLINE void attend_body(const float* q, int32_t kv_heads, int32_t group, int32_t head_dim,
                             float scale, const void* k, const void* v, DType type, int64_t stride,
                             int64_t n, float* scores, SoftmaxPart state) {
  switch (type) {
    case DType::kF16:
      return attend_typed<W, DType::kF16>(q, kv_heads, group, head_dim, scale, k, v, stride, n,
                                          scores, state);
    case DType::kQ8_0:
      return attend_typed<W, DType::kQ8_0>(q, kv_heads, group, head_dim, scale, k, v, stride, n,
                                           scores, state);
    default:
      return attend_typed<W, DType::kF32>(q, kv_heads, group, head_dim, scale, k, v, stride, n,
                                          scores, state);
  }
}

template <int W>
DUET_INLINE void merge_body(const SoftmaxPart* parts, int64_t n_parts, int32_t heads,
                            int32_t head_dim, float* out) {
  for (int64_t h = 0; h < heads; ++h) {
    float m = -INFINITY;
    for (int64_t i = 0; i < n_parts; ++i) m = parts[i].max[h] > m ? parts[i].max[h] : m;
    float total = 0.0f;
    for (int64_t i = 0; i < n_parts; ++i) total += parts[i].sum[h] * std::exp(parts[i].max[h] - m);
    float* o = out + h * head_dim;
    for (int64_t d = 0; d < head_dim; d += W) {
      typename Vec<W>::F a{};
      for (int64_t i = 0; i < n_parts; ++i) {
        a += load<W>(parts[i].acc + h * head_dim + d) * (std::exp(parts[i].max[h] - m) / total);
      }
      store<W>(o + d, a);
    }
  }
}

template <int W>
DUET_INLINE void swiglu_body(const float* gate, const float* up, float* out, int64_t n) {
  const int64_t whole = n / W * W;
  for (int64_t i = 0; i < whole; i += W) {
    const typename Vec<W>::F g = load<W>(gate + i);
    store<W>(out + i, g / (1.0f + exp_v<W>(-g)) * load<W>(up + i));
  }
  for (int64_t i = whole; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

// gelu(g) · up with GELU's tanh form, written as g · sigmoid(2y):
// g/2 · (1 + tanh(y)) = g / (1 + exp(-2y)), y = √(2/π) · (g + 0.044715 g³).
// For very negative g, exp overflows to inf and the quotient is -0, the
// limit; for very positive g it is g.
template <int W>
DUET_INLINE void geglu_body(const float* gate, const float* up, float* out, int64_t n) {
  constexpr float k2 = 2.0f * 0.7978845608028654f;  // 2 √(2/π)
  constexpr float c = 0.044715f;
  const int64_t whole = n / W * W;
  for (int64_t i = 0; i < whole; i += W) {
    const typename Vec<W>::F g = load<W>(gate + i);
    const typename Vec<W>::F z = k2 * (g + c * g * g * g);
    store<W>(out + i, g / (1.0f + exp_v<W>(-z)) * load<W>(up + i));
  }
  for (int64_t i = whole; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-k2 * (g + c * g * g * g))) * up[i];
  }
}

// Block layouts as duet/block_formats.h gives them: element j < 16 of a
// 4-bit block is the low nibble of qs[j], element j + 16 its high nibble.
template <int W>
DUET_INLINE void dequantize_body(DType type, const void* src, float* dst, int64_t n) {
  constexpr int kHalf = kQK / 2;
  const auto* b = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < n; i += kQK) {
    float* y = dst + i;
    if (type == DType::kQ8_0) {
      const float d = f16(b + offsetof(BlockQ8_0, d));
      for (int j = 0; j < kQK; j += W) {
        typename Vec<W>::I8 q;
        std::memcpy(&q, b + offsetof(BlockQ8_0, qs) + j, sizeof q);
        store<W>(y + j, widen<W>(q) * d);
      }
      b += sizeof(BlockQ8_0);
      continue;
    }
    const bool has_min = type == DType::kQ4_1;
    const float d = f16(b + (has_min ? offsetof(BlockQ4_1, d) : offsetof(BlockQ4_0, d)));
    // q4_0: d(q - 8) = dq - 8d
    const float m = has_min ? f16(b + offsetof(BlockQ4_1, m)) : -8.0f * d;
    const uint8_t* qs = b + (has_min ? offsetof(BlockQ4_1, qs) : offsetof(BlockQ4_0, qs));
    for (int j = 0; j < kHalf; j += W) {
      typename Vec<W>::U8 q;
      std::memcpy(&q, qs + j, sizeof q);
      store<W>(y + j, widen<W>(q & 0x0f) * d + m);
      store<W>(y + kHalf + j, widen<W>(q >> 4) * d + m);
    }
    b += has_min ? sizeof(BlockQ4_1) : sizeof(BlockQ4_0);
  }
}

template <int W>
DUET_INLINE void widen_f16_body(const uint16_t* src, int64_t stride, int64_t rows, int64_t cols,
                                float* dst) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; c += W)
      store<W>(dst + r * cols + c, load_f16<W>(src + r * stride + c));
  }
}

// Round to nearest even, with the bit manipulations of F. Giesen's
// float_to_half_fast3_rtne: normal results by adding a rounding bias to the
// bits, subnormal ones by letting a float addition round, NaN kept quiet.
template <int W>
DUET_INLINE void narrow_f16_body(const float* src, uint16_t* dst, int64_t n) {
  using U = typename Vec<W>::U;
  using F = typename Vec<W>::F;
  const U f32_infinity = U{} + (255u << 23);
  const U f16_overflow = U{} + ((127u + 16u) << 23);  // 2^16: rounds past the f16 range
  const U subnormal_bound = U{} + (113u << 23);       // 2^-14, the smallest normal f16
  const U magic = U{} + (((127u - 15u) + (23u - 10u) + 1u) << 23);
  for (int64_t i = 0; i < n; i += W) {
    const U bits = __builtin_bit_cast(U, load<W>(src + i));
    const U sign = bits & 0x80000000u;
    const U mag = bits ^ sign;
    const U special = mag > f32_infinity ? U{} + 0x7e00u : U{} + 0x7c00u;
    const U subnormal =
        __builtin_bit_cast(U, __builtin_bit_cast(F, mag) + __builtin_bit_cast(F, magic)) - magic;
    const U normal = (mag + ((15u - 127u) << 23) + 0xfffu + ((mag >> 13) & 1u)) >> 13;
    U h = mag >= f16_overflow ? special : (mag < subnormal_bound ? subnormal : normal);
    h |= sign >> 16;
    typename Vec<W>::U16 out = __builtin_convertvector(h, typename Vec<W>::U16);
    std::memcpy(dst + i, &out, sizeof out);
  }
}

// q8_0 as duet::quantize_row rounds it: d = max|x| / 127 (stored as f16),
// q = x * (1 / d) rounded half away from zero (std::lround). The product is
// truncated towards zero and moved one step out when it lies at least half
// way to the next integer; every comparison is exact, so no fused
// multiply-add can change a rounding.
template <int W>
DUET_INLINE void quantize_q8_0_body(const float* src, void* dst, int64_t n) {
  using F = typename Vec<W>::F;
  using I = typename Vec<W>::I;
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n; b += kQK, out += sizeof(BlockQ8_0)) {
    F vmax{};
    for (int j = 0; j < kQK; j += W) {
      const F a = __builtin_bit_cast(F, __builtin_bit_cast(I, load<W>(src + b + j)) & 0x7fffffff);
      vmax = a > vmax ? a : vmax;
    }
    const float d = hmax<W>(vmax) / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const uint16_t h = f32_to_f16(d);
    std::memcpy(out, &h, sizeof h);
    for (int j = 0; j < kQK; j += W) {
      const F y = load<W>(src + b + j) * id;
      I t = __builtin_convertvector(y, I);
      const F whole = __builtin_convertvector(t, F);
      t -= y >= whole + 0.5f;  // a true comparison is -1
      t += y <= whole - 0.5f;
      const typename Vec<W>::I8 q = __builtin_convertvector(t, typename Vec<W>::I8);
      std::memcpy(out + offsetof(BlockQ8_0, qs) + j, &q, sizeof q);
    }
  }
}

// One pair of rope_body: (a, b) turned by the angle of cosine c, sine s, in
// double — where the float products are exact, so the one rounding of each
// sum (fused or not) is the reference's.
DUET_INLINE void rope_pair(float& a, float& b, double c, double s) {
  const double x = a, y = b;
  a = static_cast<float>(x * c - y * s);
  b = static_cast<float>(x * s + y * c);
}

template <int W>
DUET_INLINE void rope_body(float* v, const float* cs, int64_t half, bool adjacent) {
  using F = typename Vec<W>::F;
  using I = typename Vec<W>::I;
  using D = typename Vec<W>::D;
  auto wide = [](F f) { return __builtin_convertvector(f, D); };
  const int64_t step = adjacent ? W / 2 : W;  // pairs per vector
  const int64_t whole = half / step * step;
  if (adjacent) {
    // x = (a0, b0, a1, b1, ...), cs = (c0, s0, c1, s1, ...): x · (c0, c0,
    // c1, c1, ...) + (-b0, a0, -b1, a1, ...) · (s0, s0, s1, s1, ...).
    I cos_lanes, sin_lanes, swap;
    F sign;
    for (int i = 0; i < W; ++i) {
      cos_lanes[i] = i & ~1;
      sin_lanes[i] = i | 1;
      swap[i] = i ^ 1;
      sign[i] = i % 2 == 0 ? -1.0f : 1.0f;
    }
    for (int64_t j = 0; j < whole; j += step) {
      const F x = load<W>(v + 2 * j);
      const F t = load<W>(cs + 2 * j);
      const D r = wide(x) * wide(__builtin_shuffle(t, cos_lanes)) +
                  wide(sign * __builtin_shuffle(x, swap)) * wide(__builtin_shuffle(t, sin_lanes));
      store<W>(v + 2 * j, __builtin_convertvector(r, F));
    }
    for (int64_t j = whole; j < half; ++j)
      rope_pair(v[2 * j], v[2 * j + 1], cs[2 * j], cs[2 * j + 1]);
    return;
  }
  // Pairs (v[j], v[j + half]); cs's two vectors deinterleaved.
  I cos_lanes, sin_lanes;
  for (int i = 0; i < W; ++i) {
    cos_lanes[i] = 2 * i;
    sin_lanes[i] = 2 * i + 1;
  }
  for (int64_t j = 0; j < whole; j += step) {
    const F t0 = load<W>(cs + 2 * j), t1 = load<W>(cs + 2 * j + W);
    const D c = wide(__builtin_shuffle(t0, t1, cos_lanes));
    const D s = wide(__builtin_shuffle(t0, t1, sin_lanes));
    const D a = wide(load<W>(v + j));
    const D b = wide(load<W>(v + half + j));
    store<W>(v + j, __builtin_convertvector(a * c - b * s, F));
    store<W>(v + half + j, __builtin_convertvector(a * s + b * c, F));
  }
  for (int64_t j = whole; j < half; ++j) rope_pair(v[j], v[j + half], cs[2 * j], cs[2 * j + 1]);
}

// The kernels of one instruction set, attend_##NAME defined before it.
#define DUET_VECTOR_KERNELS(NAME, W, TARGET, EXPAND_KQUANT)                                     \
  TARGET void softmax_##NAME(float* s, int64_t valid, int64_t width) {                          \
    softmax_body<W>(s, valid, width);                                                           \
  }                                                                                             \
  TARGET void merge_##NAME(const SoftmaxPart* parts, int64_t n_parts, int32_t heads,            \
                           int32_t head_dim, float* out) {                                      \
    merge_body<W>(parts, n_parts, heads, head_dim, out);                                        \
  }                                                                                             \
  TARGET void swiglu_##NAME(const float* gate, const float* up, float* out, int64_t n) {        \
    swiglu_body<W>(gate, up, out, n);                                                           \
  }                                                                                             \
  TARGET void geglu_##NAME(const float* gate, const float* up, float* out, int64_t n) {         \
    geglu_body<W>(gate, up, out, n);                                                            \
  }                                                                                             \
  TARGET void dequantize_##NAME(DType type, const void* src, float* dst, int64_t n) {           \
    dequantize_body<W>(type, src, dst, n);                                                      \
  }                                                                                             \
  TARGET void widen_f16_##NAME(const uint16_t* src, int64_t stride, int64_t rows, int64_t cols, \
                               float* dst) {                                                    \
    widen_f16_body<W>(src, stride, rows, cols, dst);                                            \
  }                                                                                             \
  TARGET void narrow_f16_##NAME(const float* src, uint16_t* dst, int64_t n) {                   \
    narrow_f16_body<W>(src, dst, n);                                                            \
  }                                                                                             \
  TARGET void quantize_q8_0_##NAME(const float* src, void* dst, int64_t n) {                    \
    quantize_q8_0_body<W>(src, dst, n);                                                         \
  }                                                                                             \
  TARGET void rope_##NAME(float* v, const float* cs, int64_t half, bool adjacent) {             \
    rope_body<W>(v, cs, half, adjacent);                                                        \
  }                                                                                             \
  constexpr VectorKernels k##NAME{softmax_##NAME,       attend_##NAME,    nullptr,              \
                                  merge_##NAME,         swiglu_##NAME,    geglu_##NAME,         \
                                  dequantize_##NAME,    widen_f16_##NAME, narrow_f16_##NAME,    \
                                  quantize_q8_0_##NAME, EXPAND_KQUANT,    rope_##NAME};

#define DUET_TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))
#define DUET_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))

void attend_Baseline(const float* q, int32_t kv_heads, int32_t group, int32_t head_dim, float scale,
                     const void* k, const void* v, DType type, int64_t stride, int64_t n,
                     float* scores, SoftmaxPart state) {
  attend_body<4>(q, kv_heads, group, head_dim, scale, k, v, type, stride, n, scores, state);
}
DUET_VECTOR_KERNELS(Baseline, 4, , detail::expand_kquant_scalar)

#if defined(__x86_64__)
// VectorKernels::attend from an instruction set's intrinsics kernels for the
// memory-bound halves (kernels/attend_avx2.h, attend_avx512.h) and the
// generic online-softmax step between them, at width W.
template <int W, auto kScores, auto kValues>
DUET_INLINE void attend_halves(const float* q, int32_t kv_heads, int32_t group, int32_t head_dim,
                               float scale, const void* k, const void* v, DType type,
                               int64_t stride, int64_t n, float* scores, SoftmaxPart state) {
  kScores(q, kv_heads, group, head_dim, scale, k, type, stride, n, scores,
          key_staging(scores, int64_t{kv_heads} * group * n));
  attend_softmax_body<W>(int64_t{kv_heads} * group, head_dim, n, scores, state);
  kValues(kv_heads, group, head_dim, v, type, stride, n, scores, state.acc);
}

DUET_TARGET_AVX2 void attend_Avx2(const float* q, int32_t kv_heads, int32_t group, int32_t head_dim,
                                  float scale, const void* k, const void* v, DType type,
                                  int64_t stride, int64_t n, float* scores, SoftmaxPart state) {
  attend_halves<8, detail::attend_scores_avx2, detail::attend_values_avx2>(
      q, kv_heads, group, head_dim, scale, k, v, type, stride, n, scores, state);
}
DUET_VECTOR_KERNELS(Avx2, 8, DUET_TARGET_AVX2, detail::expand_kquant_avx2)

DUET_TARGET_AVX512 void attend_Avx512(const float* q, int32_t kv_heads, int32_t group,
                                      int32_t head_dim, float scale, const void* k, const void* v,
                                      DType type, int64_t stride, int64_t n, float* scores,
                                      SoftmaxPart state) {
  attend_halves<16, detail::attend_scores_avx512, detail::attend_values_avx512>(
      q, kv_heads, group, head_dim, scale, k, v, type, stride, n, scores, state);
}
DUET_VECTOR_KERNELS(Avx512, 16, DUET_TARGET_AVX512, detail::expand_kquant_avx512)

// Attention over a cache in tiles (kernels/kv_tiles.h) from a kernel's two
// halves and the online-softmax step between them: f16 with AVX-512
// (kernels/attend_avx512.h), and on the VNNI path q8_0 too
// (kernels/attend_tiles.h).
template <auto kScores, auto kValues>
DUET_INLINE void attend_tile_halves(const float* q, int32_t kv_heads, int32_t group,
                                    int32_t head_dim, float scale, const uint8_t* k,
                                    const uint8_t* v, int64_t tile_bytes, int32_t lane0, int64_t n,
                                    float* scores, SoftmaxPart state) {
  kScores(q, kv_heads, group, head_dim, scale, k, tile_bytes, lane0, n, scores);
  attend_softmax_body<16>(int64_t{kv_heads} * group, head_dim, n, scores, state);
  kValues(kv_heads, group, head_dim, v, tile_bytes, lane0, n, scores, state.acc);
}

// The q8_0 scores, their query terms staged after the scores.
void tile_scores_q8(const float* q, int32_t kv_heads, int32_t group, int32_t head_dim, float scale,
                    const uint8_t* k, int64_t tile_bytes, int32_t lane0, int64_t n, float* scores) {
  detail::attend_tile_scores_vnni(q, kv_heads, group, head_dim, scale, k, tile_bytes, lane0, n,
                                  scores, scores + int64_t{kv_heads} * group * n);
}

DUET_TARGET_AVX512 void attend_tiles_Avx512(const float* q, int32_t kv_heads, int32_t group,
                                            int32_t head_dim, float scale, DType type,
                                            const uint8_t* k, const uint8_t* v, int64_t tile_bytes,
                                            int32_t lane0, int64_t n, float* scores,
                                            SoftmaxPart state) {
  (void)type;  // f16: the only type this path keeps in tiles
  attend_tile_halves<detail::attend_tile_scores_f16_avx512, detail::attend_tile_values_f16_avx512>(
      q, kv_heads, group, head_dim, scale, k, v, tile_bytes, lane0, n, scores, state);
}
constexpr VectorKernels kAvx512Tiles = [] {
  VectorKernels kernels = kAvx512;
  kernels.attend_tiles = attend_tiles_Avx512;
  return kernels;
}();

DUET_TARGET_AVX512 void attend_tiles_Avx512Vnni(const float* q, int32_t kv_heads, int32_t group,
                                                int32_t head_dim, float scale, DType type,
                                                const uint8_t* k, const uint8_t* v,
                                                int64_t tile_bytes, int32_t lane0, int64_t n,
                                                float* scores, SoftmaxPart state) {
  if (type == DType::kF16) {
    attend_tiles_Avx512(q, kv_heads, group, head_dim, scale, type, k, v, tile_bytes, lane0, n,
                        scores, state);
    return;
  }
  attend_tile_halves<tile_scores_q8, detail::attend_tile_values_vnni>(
      q, kv_heads, group, head_dim, scale, k, v, tile_bytes, lane0, n, scores, state);
}
constexpr VectorKernels kAvx512Vnni = [] {
  VectorKernels kernels = kAvx512;
  kernels.attend_tiles = attend_tiles_Avx512Vnni;
  return kernels;
}();
#endif

}  // namespace

const VectorKernels& vector_kernels(CpuPath path) {
#if defined(__x86_64__)
  switch (path) {
    case CpuPath::kAvx512:
      return kAvx512Tiles;
    case CpuPath::kAvx512Vnni:
      return kAvx512Vnni;
    case CpuPath::kAvx2:
      return kAvx2;
    case CpuPath::kScalar:
      break;
  }
#else
  (void)path;
#endif
  return kBaseline;
}

void expand_weights(const VectorKernels& kernels, DType type, const void* src, float* dst,
                    int64_t n) {
  if (has_vector_dequantize(type)) {
    kernels.dequantize(type, src, dst, n);
  } else if (kquant_kernel_type(type)) {
    kernels.expand_kquant(type, src, dst, n);
  } else {
    dequantize_row(type, src, dst, n);
  }
}

}  // namespace duet::onednn
