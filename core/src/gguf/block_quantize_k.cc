// The K-quant quantizers of block_quantize.h. Each super-block is fitted in
// two steps, as ggml's reference quantizers fit it: every sub-block gets the
// scale (and minimum) that best fits it on its own, by a small search over
// candidate scales; those are then stored as 6- or 8-bit multiples of one f16
// per super-block, and every element is rounded again against the scale it
// will actually be decoded with. The float operations are written in ggml's
// order and core is built without contraction into FMA, so the bytes equal
// those of ggml's reference quantizers built the same way, which llama.cpp's
// `llama-quantize` runs without an importance matrix (every tensor of
// SmolLM2 in every K-quant file type: bench/quantize_vs_llama_cpp.py). A
// ggml built with contraction rounds some near-ties differently.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "duet/quant.h"
#include "gguf/block_quantize.h"

namespace duet::blocks {
namespace {

constexpr int kSub32 = 32;  // q4_k / q5_k sub-block
constexpr int kSub16 = 16;  // q2_k / q3_k / q6_k sub-block
// Below this largest magnitude a sub-block counts as all zeros.
constexpr float kZeroGroup = 1e-15f;

// Round to nearest, ties to even (the default rounding mode), as ggml's
// nearest_int, which also makes NaN 0 (a scale that overflowed f16 gives
// inf * 0); clamped far beyond any level so that no float overflows int.
int nearest(float v) {
  if (std::isnan(v)) return 0;
  return static_cast<int>(std::clamp(std::nearbyint(v), -0x1p30f, 0x1p30f));
}

// The asymmetric fit of n values to levels 0..nmax: x ≈ scale * L - min_out,
// weighted least squares over the candidate scales (nmax + rmin + rdelta*i) /
// (max - min), i = 0..steps, starting from the plain min/max fit. Once a
// candidate wins, its offset is the `min` of the candidates after it (ggml's
// search does so, and bit-equal files need the same walk). The minimum is
// never above zero (an all-positive group keeps 0 as its offset). Returns
// the scale; L holds the chosen levels, `work` n scratch bytes. The error
// weighed is the squared difference, or its magnitude where `abs_error`
// (q2_k's fit).
float fit_with_min(int n, int nmax, const float* x, const float* w, float rmin, float rdelta,
                   int steps, bool abs_error, uint8_t* L, uint8_t* work, float& min_out) {
  float lo = x[0];
  float hi = x[0];
  float sum_w = w[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  lo = std::min(lo, 0.0f);
  if (hi == lo) {
    std::memset(L, 0, static_cast<size_t>(n));
    min_out = -lo;
    return 0.0f;
  }
  auto levels = [&](float inv, uint8_t* out) {
    for (int i = 0; i < n; ++i)
      out[i] = static_cast<uint8_t>(std::clamp(nearest(inv * (x[i] - lo)), 0, nmax));
  };
  auto weighted_error = [&](float scale, float offset, const uint8_t* levels_of) {
    float err = 0.0f;
    for (int i = 0; i < n; ++i) {
      const float diff = scale * levels_of[i] + offset - x[i];
      err += w[i] * (abs_error ? std::fabs(diff) : diff * diff);
    }
    return err;
  };
  const auto top = static_cast<float>(nmax);
  float inv = top / (hi - lo);
  float scale = 1.0f / inv;
  levels(inv, L);
  float best = weighted_error(scale, lo, L);
  for (int step = 0; step <= steps; ++step) {
    inv = (rmin + rdelta * static_cast<float>(step) + top) / (hi - lo);
    levels(inv, work);
    float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
    for (int i = 0; i < n; ++i) {
      const float wl = w[i] * work[i];
      sum_l += wl;
      sum_l2 += wl * work[i];
      sum_xl += wl * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (det <= 0.0f) continue;
    float s = (sum_w * sum_xl - sum_x * sum_l) / det;
    float m = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (m > 0.0f) {
      m = 0.0f;
      s = sum_xl / sum_l2;
    }
    const float err = weighted_error(s, m, work);
    if (err < best) {
      std::memcpy(L, work, static_cast<size_t>(n));
      best = err;
      scale = s;
      lo = m;  // later candidates are spread over [m, hi], as in ggml
    }
  }
  min_out = -lo;
  return scale;
}

// The symmetric fit of n values to levels -nmax..nmax-1, weighted by x²:
// the scale -max/nmax (max the element of largest magnitude, with its sign)
// and 18 candidates around it, keeping the least-squares best. L holds
// level + nmax. Returns the scale (0 for an all-zero group).
float fit_symmetric(int n, int nmax, const float* x, int8_t* L) {
  const float vmax = signed_absmax(x, n);
  if (std::fabs(vmax) < kZeroGroup) {
    std::memset(L, 0, static_cast<size_t>(n));
    return 0.0f;
  }
  auto level = [&](float inv, int i) { return std::clamp(nearest(inv * x[i]), -nmax, nmax - 1); };
  // Σ w x l and Σ w l² with w = x², in ggml's association.
  auto sums = [&](float inv, float& sum_lx, float& sum_l2) {
    sum_lx = 0.0f;
    sum_l2 = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int l = level(inv, i);
      const float w = x[i] * x[i];
      const auto fl = static_cast<float>(l);
      sum_lx += w * x[i] * fl;
      sum_l2 += w * fl * fl;
    }
  };
  auto store = [&](float inv) {
    for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(level(inv, i) + nmax);
  };
  const auto top = static_cast<float>(nmax);
  float inv = -top / vmax;
  float sum_lx = 0.0f, sum_l2 = 0.0f;
  sums(inv, sum_lx, sum_l2);
  store(inv);
  float scale = sum_l2 != 0.0f ? sum_lx / sum_l2 : 0.0f;
  float best = scale * sum_lx;
  for (int step = -9; step <= 9; ++step) {
    if (step == 0) continue;
    inv = -(top + 0.1f * static_cast<float>(step)) / vmax;
    sums(inv, sum_lx, sum_l2);
    if (sum_l2 > 0.0f && sum_lx * sum_lx > best * sum_l2) {
      store(inv);
      scale = sum_lx / sum_l2;
      best = scale * sum_lx;
    }
  }
  return scale;
}

// q3_k's symmetric fit of n values to levels -nmax..nmax-1, weighted by x²:
// start from the scale -max/nmax (max the element of largest magnitude, with
// its sign), then up to five sweeps that move one element at a time to the
// level that best fits the least-squares scale of all the others, keeping a
// move only when it raises (Σ w x l)² / Σ w l². L holds level + nmax.
// Returns the least-squares scale (0 for an all-zero group).
float fit_q3(int n, int nmax, const float* x, int8_t* L) {
  const float vmax = signed_absmax(x, n);
  if (std::fabs(vmax) < kZeroGroup) {
    std::memset(L, 0, static_cast<size_t>(n));
    return 0.0f;
  }
  const float inv = -static_cast<float>(nmax) / vmax;
  float sum_lx = 0.0f;
  float sum_l2 = 0.0f;
  for (int i = 0; i < n; ++i) {
    const int l = std::clamp(nearest(inv * x[i]), -nmax, nmax - 1);
    L[i] = static_cast<int8_t>(l);
    const float w = x[i] * x[i];
    const auto fl = static_cast<float>(l);
    sum_lx += w * x[i] * fl;
    sum_l2 += w * fl * fl;
  }
  for (int sweep = 0; sweep < 5; ++sweep) {
    int moved = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      const auto old_l = static_cast<float>(L[i]);
      float lx = sum_lx - w * x[i] * old_l;
      if (!(lx > 0.0f)) continue;  // as ggml: a NaN sum moves nothing
      float l2 = sum_l2 - w * old_l * old_l;
      const int l = std::clamp(nearest(x[i] * l2 / lx), -nmax, nmax - 1);
      if (l == L[i]) continue;
      const auto fl = static_cast<float>(l);
      lx += w * x[i] * fl;
      l2 += w * fl * fl;
      if (l2 > 0.0f && lx * lx * sum_l2 > sum_lx * sum_lx * l2) {
        L[i] = static_cast<int8_t>(l);
        sum_lx = lx;
        sum_l2 = l2;
        ++moved;
      }
    }
    if (moved == 0) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
  return sum_l2 > 0.0f ? sum_lx / sum_l2 : 0.0f;
}

// Fits each 16-element sub-block of a super-block with `fit(x, L)` (its
// scale into scales[s], its levels into L) and returns the scale of largest
// magnitude, with its sign (the first of equals; 0 when every scale is 0).
template <class Fit>
float fit_sub_blocks16(const float* x, int8_t* L, float (&scales)[kQK_K / kSub16], Fit fit) {
  float max_scale = 0.0f;
  float max_abs = 0.0f;
  for (int s = 0; s < kQK_K / kSub16; ++s) {
    scales[s] = fit(x + kSub16 * s, L + kSub16 * s);
    if (std::fabs(scales[s]) > max_abs) {
      max_abs = std::fabs(scales[s]);
      max_scale = scales[s];
    }
  }
  return max_scale;
}

// Packs 2-bit levels (0..3) of a super-block as k_plane_bits reads them:
// element j = 128 h + 32 r + l at bits 2 r of qs[32 h + l].
void put_plane_bits(const uint8_t* L, uint8_t* qs) {
  for (int h = 0; h < kQK_K / 128; ++h) {
    for (int l = 0; l < 32; ++l) {
      const uint8_t* e = L + 128 * h + l;
      qs[32 * h + l] = static_cast<uint8_t>(e[0] | e[32] << 2 | e[64] << 4 | e[96] << 6);
    }
  }
}

// Stores the 6-bit scale and min of sub-block s (0..7) of a q4_k / q5_k
// super-block: the inverse of k4_scale_min. Sub-blocks 0..3 first, then
// 4..7, whose high bits go into the tops of bytes 0..7.
void put_k4_scale_min(uint8_t* scales, int s, int sc, int m) {
  if (s < 4) {
    scales[s] = static_cast<uint8_t>(sc);
    scales[s + 4] = static_cast<uint8_t>(m);
  } else {
    scales[s + 4] = static_cast<uint8_t>((sc & 15) | (m & 15) << 4);
    scales[s - 4] |= static_cast<uint8_t>((sc >> 4) << 6);
    scales[s] |= static_cast<uint8_t>((m >> 4) << 6);
  }
}

// q4_k and q5_k's shared work: fits the eight 32-element sub-blocks of x
// (levels 0..nmax), stores d, dmin and the packed 6-bit scales and mins, and
// leaves each element's final level in L.
template <class Block>
void fit_k4_super_block(const float* x, int nmax, float rmin, int steps, Block& out,
                        uint8_t (&L)[kQK_K]) {
  float scales[kQK_K / kSub32];
  float mins[kQK_K / kSub32];
  float weights[kSub32];
  uint8_t work[kSub32];
  float max_scale = 0.0f;
  float max_min = 0.0f;
  for (int s = 0; s < kQK_K / kSub32; ++s) {
    const float* xs = x + kSub32 * s;
    float sum_x2 = 0.0f;
    for (int i = 0; i < kSub32; ++i) sum_x2 += xs[i] * xs[i];
    const float rms = std::sqrt(sum_x2 / kSub32);
    for (int i = 0; i < kSub32; ++i) weights[i] = rms + std::fabs(xs[i]);
    scales[s] = fit_with_min(kSub32, nmax, xs, weights, rmin, 0.1f, steps, false, L + kSub32 * s,
                             work, mins[s]);
    max_scale = std::max(max_scale, scales[s]);
    max_min = std::max(max_min, mins[s]);
  }
  const float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0.0f ? 63.0f / max_min : 0.0f;
  std::memset(out.scales, 0, sizeof(out.scales));
  for (int s = 0; s < kQK_K / kSub32; ++s) {
    // As uint8_t first, so a negative fit wraps high and is clamped to 63.
    const int sc = std::min<int>(63, static_cast<uint8_t>(nearest(inv_scale * scales[s])));
    const int m = std::min<int>(63, static_cast<uint8_t>(nearest(inv_min * mins[s])));
    put_k4_scale_min(out.scales, s, sc, m);
  }
  out.d = f32_to_f16(max_scale / 63.0f);
  out.dmin = f32_to_f16(max_min / 63.0f);
  for (int s = 0; s < kQK_K / kSub32; ++s) {
    int sc = 0, m = 0;
    k4_scale_min(out.scales, s, sc, m);
    const float d = f16_to_f32(out.d) * static_cast<float>(sc);
    if (d == 0.0f) continue;  // keeps the levels of the fit
    const float dm = f16_to_f32(out.dmin) * static_cast<float>(m);
    for (int i = 0; i < kSub32; ++i) {
      L[kSub32 * s + i] =
          static_cast<uint8_t>(std::clamp(nearest((x[kSub32 * s + i] + dm) / d), 0, nmax));
    }
  }
}

}  // namespace

BlockQ2_K quantize_q2_k(const float* x) {
  BlockQ2_K out;
  uint8_t L[kQK_K];
  uint8_t work[kSub16];
  float weights[kSub16];
  float scales[kQK_K / kSub16];
  float mins[kQK_K / kSub16];
  float max_scale = 0.0f;
  float max_min = 0.0f;
  for (int s = 0; s < kQK_K / kSub16; ++s) {
    const float* xs = x + kSub16 * s;
    for (int i = 0; i < kSub16; ++i) weights[i] = std::fabs(xs[i]);
    scales[s] =
        fit_with_min(kSub16, 3, xs, weights, -0.5f, 0.1f, 15, true, L + kSub16 * s, work, mins[s]);
    max_scale = std::max(max_scale, scales[s]);
    max_min = std::max(max_min, mins[s]);
  }
  // Stored as bytes, as ggml stores them: a negative fit wraps.
  std::memset(out.scales, 0, sizeof(out.scales));
  out.d = f32_to_f16(0.0f);
  out.dmin = f32_to_f16(0.0f);
  if (max_scale > 0.0f) {
    const float inv = 15.0f / max_scale;
    for (int s = 0; s < kQK_K / kSub16; ++s) {
      out.scales[s] = static_cast<uint8_t>(nearest(inv * scales[s]));
    }
    out.d = f32_to_f16(max_scale / 15.0f);
  }
  if (max_min > 0.0f) {
    const float inv = 15.0f / max_min;
    for (int s = 0; s < kQK_K / kSub16; ++s) {
      out.scales[s] |= static_cast<uint8_t>(nearest(inv * mins[s]) << 4);
    }
    out.dmin = f32_to_f16(max_min / 15.0f);
  }
  for (int s = 0; s < kQK_K / kSub16; ++s) {
    const float d = f16_to_f32(out.d) * static_cast<float>(q2_k_scale(out, s));
    if (d == 0.0f) continue;  // keeps the levels of the fit
    const float dm = f16_to_f32(out.dmin) * static_cast<float>(q2_k_min(out, s));
    for (int i = 0; i < kSub16; ++i) {
      L[kSub16 * s + i] =
          static_cast<uint8_t>(std::clamp(nearest((x[kSub16 * s + i] + dm) / d), 0, 3));
    }
  }
  put_plane_bits(L, out.qs);
  return out;
}

BlockQ3_K quantize_q3_k(const float* x) {
  BlockQ3_K out;
  std::memset(&out, 0, sizeof(out));
  int8_t L[kQK_K];
  float scales[kQK_K / kSub16];
  const float max_scale = fit_sub_blocks16(
      x, L, scales, [](const float* xs, int8_t* ls) { return fit_q3(kSub16, 4, xs, ls); });
  out.d = f32_to_f16(0.0f);
  if (max_scale != 0.0f) {
    const float inv = -32.0f / max_scale;
    for (int s = 0; s < kQK_K / kSub16; ++s) {
      // As int8_t first, as ggml rounds it; |inv * scale| <= 32 keeps it whole.
      const auto rounded = static_cast<int8_t>(nearest(inv * scales[s]));
      const int sc = std::clamp<int>(rounded, -32, 31) + 32;
      out.scales[s % 8] |= static_cast<uint8_t>((sc & 15) << (4 * (s / 8)));
      out.scales[8 + s % 4] |= static_cast<uint8_t>((sc >> 4) << (2 * (s / 4)));
    }
    out.d = f32_to_f16(1.0f / inv);
  }
  for (int s = 0; s < kQK_K / kSub16; ++s) {
    const float d = f16_to_f32(out.d) * static_cast<float>(q3_k_scale(out, s) - 32);
    if (d == 0.0f) continue;  // keeps the levels of the fit
    for (int i = 0; i < kSub16; ++i) {
      L[kSub16 * s + i] =
          static_cast<int8_t>(std::clamp(nearest(x[kSub16 * s + i] / d), -4, 3) + 4);
    }
  }
  // Levels 4..7 set the element's hmask bit (bit j / 32 of hmask[j % 32])
  // and keep their low two bits.
  uint8_t low[kQK_K];
  for (int j = 0; j < kQK_K; ++j) {
    const bool high = L[j] > 3;
    if (high) out.hmask[j % 32] |= static_cast<uint8_t>(1u << (j / 32));
    low[j] = static_cast<uint8_t>(high ? L[j] - 4 : L[j]);
  }
  put_plane_bits(low, out.qs);
  return out;
}

BlockQ4_K quantize_q4_k(const float* x) {
  BlockQ4_K out;
  uint8_t L[kQK_K];
  fit_k4_super_block(x, 15, -1.0f, 20, out, L);
  for (int j = 0; j < kQK_K; ++j) {
    const int chunk = j / 64, nib = (j % 64) / 32, l = j % 32;
    if (nib == 0)
      out.qs[32 * chunk + l] = L[j];
    else
      out.qs[32 * chunk + l] |= static_cast<uint8_t>(L[j] << 4);
  }
  return out;
}

BlockQ5_K quantize_q5_k(const float* x) {
  BlockQ5_K out;
  uint8_t L[kQK_K];
  fit_k4_super_block(x, 31, -0.5f, 15, out, L);
  std::memset(out.qh, 0, sizeof(out.qh));
  for (int j = 0; j < kQK_K; ++j) {
    const int chunk = j / 64, nib = (j % 64) / 32, l = j % 32;
    const auto low = static_cast<uint8_t>(L[j] & 15);
    if (nib == 0)
      out.qs[32 * chunk + l] = low;
    else
      out.qs[32 * chunk + l] |= static_cast<uint8_t>(low << 4);
    out.qh[l] |= static_cast<uint8_t>((L[j] >> 4) << (j / 32));
  }
  return out;
}

BlockQ6_K quantize_q6_k(const float* x) {
  BlockQ6_K out;
  std::memset(&out, 0, sizeof(out));
  int8_t L[kQK_K];
  float scales[kQK_K / kSub16];
  const float max_scale = fit_sub_blocks16(
      x, L, scales, [](const float* xs, int8_t* ls) { return fit_symmetric(kSub16, 32, xs, ls); });
  if (std::fabs(max_scale) < kZeroGroup) return out;  // all zero: d = 0, every level 0
  const float inv = -128.0f / max_scale;
  out.d = f32_to_f16(1.0f / inv);
  for (int s = 0; s < kQK_K / kSub16; ++s) {
    out.scales[s] = static_cast<int8_t>(std::min(127, nearest(inv * scales[s])));
  }
  for (int s = 0; s < kQK_K / kSub16; ++s) {
    const float d = f16_to_f32(out.d) * out.scales[s];
    if (d == 0.0f) continue;  // keeps the levels of the fit
    for (int i = 0; i < kSub16; ++i) {
      L[kSub16 * s + i] =
          static_cast<int8_t>(std::clamp(nearest(x[kSub16 * s + i] / d), -32, 31) + 32);
    }
  }
  // Element j = 128 h + 32 r + l: low nibble in ql (q6_k_quant's layout),
  // two high bits at bits 2 r of qh[32 h + l].
  for (int j = 0; j < kQK_K; ++j) {
    const int h = j / 128, r = (j % 128) / 32, l = j % 32;
    const auto q = static_cast<uint8_t>(L[j]);
    out.ql[64 * h + 32 * (r % 2) + l] |= static_cast<uint8_t>((q & 15) << (4 * (r / 2)));
    out.qh[32 * h + l] |= static_cast<uint8_t>((q >> 4) << (2 * r));
  }
  return out;
}

}  // namespace duet::blocks
