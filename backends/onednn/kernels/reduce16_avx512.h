// kernels/reduce16_avx512.h — sixteen horizontal reductions at once, for
// the AVX-512 kernels: lane j of the result reduces the 16 lanes of p[j].
//
// Each level combines the two halves of every vector's partial results,
// packing two vectors into one: 16 → 8 → 4 → 2 → 1 vectors, 15
// operations and 30 shuffles in all where 16 separate reductions take
// ~140 dependent instructions. The last level leaves vector k's result in
// lane 4 * (k % 4) + k / 4, which one permute puts in order. The order in
// which each vector's lanes are combined is fixed (the same tree for every
// j), so a float sum is reproducible bit for bit.
//
// Internal to the onednn backend's AVX-512 sources (avx512_intrinsics.h).
#pragma once

#include "kernels/avx512_intrinsics.h"

namespace duet::onednn::detail {

// op(a, b): the lane-wise reduction, on float vectors (integer ones cast
// with _mm512_castsi512_ps and back).
template <class Op>
[[gnu::always_inline]] inline __m512 reduce16(const __m512 p[16], const Op& op) {
  __m512 a[8];
  for (int i = 0; i < 8; ++i) {
    a[i] = op(_mm512_shuffle_f32x4(p[2 * i], p[2 * i + 1], 0x44),
              _mm512_shuffle_f32x4(p[2 * i], p[2 * i + 1], 0xee));
  }
  __m512 b[4];
  for (int i = 0; i < 4; ++i) {
    b[i] = op(_mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0x88),
              _mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0xdd));
  }
  __m512 c[2];
  for (int i = 0; i < 2; ++i) {
    c[i] = op(_mm512_shuffle_ps(b[2 * i], b[2 * i + 1], 0x44),
              _mm512_shuffle_ps(b[2 * i], b[2 * i + 1], 0xee));
  }
  const __m512 d = op(_mm512_shuffle_ps(c[0], c[1], 0x88), _mm512_shuffle_ps(c[0], c[1], 0xdd));
  return _mm512_permutexvar_ps(
      _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), d);
}

// The reductions the kernels use.
[[gnu::always_inline]] inline __m512 sum16(const __m512 p[16]) {
  return reduce16(p, [](__m512 x, __m512 y) { return _mm512_add_ps(x, y); });
}
[[gnu::always_inline]] inline __m512 max16(const __m512 p[16]) {
  return reduce16(p, [](__m512 x, __m512 y) { return _mm512_max_ps(x, y); });
}
[[gnu::always_inline]] inline __m512i sum16_epi32(const __m512i p[16]) {
  __m512 f[16];
  for (int i = 0; i < 16; ++i) f[i] = _mm512_castsi512_ps(p[i]);
  return _mm512_castps_si512(reduce16(f, [](__m512 x, __m512 y) {
    return _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(x), _mm512_castps_si512(y)));
  }));
}

}  // namespace duet::onednn::detail
