#include "gguf/block_quantize.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>

#include "duet/quant.h"

namespace duet::blocks {

float signed_absmax(const float* x, int n) {
  float amax = 0.0f;
  float vmax = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      vmax = x[j];
    }
  }
  return vmax;
}

namespace {

constexpr int kHalf = kQK / 2;

void min_max(const float* x, float& lo, float& hi) {
  lo = FLT_MAX;
  hi = -FLT_MAX;
  for (int j = 0; j < kQK; ++j) {
    lo = std::min(lo, x[j]);
    hi = std::max(hi, x[j]);
  }
}

// Packs 32 5-bit quants: low nibbles as a 4-bit block's, fifth bits in qh.
void pack5(const int (&q)[kQK], uint8_t (&qs)[kHalf], uint8_t (&qh)[4]) {
  uint32_t high = 0;
  for (int j = 0; j < kHalf; ++j) {
    qs[j] = static_cast<uint8_t>((q[j] & 15) | (q[j + kHalf] & 15) << 4);
    high |= static_cast<uint32_t>(q[j] >> 4) << j;
    high |= static_cast<uint32_t>(q[j + kHalf] >> 4) << (j + kHalf);
  }
  for (int i = 0; i < 4; ++i) qh[i] = static_cast<uint8_t>(high >> (8 * i));
}

}  // namespace

BlockQ4_0 quantize_q4_0(const float* x) {
  // Dividing by -8 maps the largest magnitude to q = 0 exactly, so the full
  // 16 levels are used on its side; ggml's sign convention keeps files equal.
  const float d = signed_absmax(x, kQK) / -8.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  BlockQ4_0 out;
  out.d = f32_to_f16(d);
  for (int j = 0; j < kHalf; ++j) {
    const int lo = std::min(15, static_cast<int>(x[j] * id + 8.5f));
    const int hi = std::min(15, static_cast<int>(x[j + kHalf] * id + 8.5f));
    out.qs[j] = static_cast<uint8_t>(lo | (hi << 4));
  }
  return out;
}

BlockQ4_1 quantize_q4_1(const float* x) {
  float lo = 0.0f, hi = 0.0f;
  min_max(x, lo, hi);
  const float d = (hi - lo) / 15.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  BlockQ4_1 out;
  out.d = f32_to_f16(d);
  out.m = f32_to_f16(lo);
  for (int j = 0; j < kHalf; ++j) {
    const int q0 = std::min(15, static_cast<int>((x[j] - lo) * id + 0.5f));
    const int q1 = std::min(15, static_cast<int>((x[j + kHalf] - lo) * id + 0.5f));
    out.qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
  }
  return out;
}

BlockQ5_0 quantize_q5_0(const float* x) {
  const float d = signed_absmax(x, kQK) / -16.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  int q[kQK];
  for (int j = 0; j < kQK; ++j) q[j] = std::min(31, static_cast<int>(x[j] * id + 16.5f));
  BlockQ5_0 out;
  out.d = f32_to_f16(d);
  pack5(q, out.qs, out.qh);
  return out;
}

BlockQ5_1 quantize_q5_1(const float* x) {
  float lo = 0.0f, hi = 0.0f;
  min_max(x, lo, hi);
  const float d = (hi - lo) / 31.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  int q[kQK];
  for (int j = 0; j < kQK; ++j) q[j] = std::min(31, static_cast<int>((x[j] - lo) * id + 0.5f));
  BlockQ5_1 out;
  out.d = f32_to_f16(d);
  out.m = f32_to_f16(lo);
  pack5(q, out.qs, out.qh);
  return out;
}

BlockQ8_0 quantize_q8_0(const float* x) {
  float amax = 0.0f;
  for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  BlockQ8_0 out;
  out.d = f32_to_f16(d);
  for (int j = 0; j < kQK; ++j) out.qs[j] = static_cast<int8_t>(std::lround(x[j] * id));
  return out;
}

}  // namespace duet::blocks
