#include "gguf/block_dequantize.h"

#include "duet/quant.h"

namespace duet::blocks {
namespace {

float f(int v) { return static_cast<float>(v); }

// q4_k and q5_k: 8 sub-blocks of 32 with 6-bit scales and mins.
template <typename Block, int (*quant)(const Block&, int)>
void dequantize_k4(const Block& b, float* y) {
  const float d = f16_to_f32(b.d);
  const float dmin = f16_to_f32(b.dmin);
  for (int s = 0; s < kQK_K / 32; ++s) {
    int sc = 0, m = 0;
    k4_scale_min(b.scales, s, sc, m);
    const float d1 = d * f(sc);
    const float m1 = dmin * f(m);
    for (int j = 32 * s; j < 32 * s + 32; ++j) y[j] = d1 * f(quant(b, j)) - m1;
  }
}

}  // namespace

void dequantize_block(const BlockQ4_0& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int j = 0; j < kQK; ++j) y[j] = d * f(q4_0_quant(b, j));
}

void dequantize_block(const BlockQ4_1& b, float* y) {
  const float d = f16_to_f32(b.d);
  const float m = f16_to_f32(b.m);
  for (int j = 0; j < kQK; ++j) y[j] = d * f(q4_1_quant(b, j)) + m;
}

void dequantize_block(const BlockQ5_0& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int j = 0; j < kQK; ++j) y[j] = d * f(q5_0_quant(b, j));
}

void dequantize_block(const BlockQ5_1& b, float* y) {
  const float d = f16_to_f32(b.d);
  const float m = f16_to_f32(b.m);
  for (int j = 0; j < kQK; ++j) y[j] = d * f(q5_1_quant(b, j)) + m;
}

void dequantize_block(const BlockQ8_0& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int j = 0; j < kQK; ++j) y[j] = d * f(b.qs[j]);
}

void dequantize_block(const BlockIQ4_NL& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int j = 0; j < kQK; ++j) y[j] = d * f(iq4_nl_quant(b, j));
}

void dequantize_block(const BlockQ2_K& b, float* y) {
  const float d = f16_to_f32(b.d);
  const float dmin = f16_to_f32(b.dmin);
  for (int s = 0; s < kQK_K / 16; ++s) {
    const float dl = d * f(q2_k_scale(b, s));
    const float ml = dmin * f(q2_k_min(b, s));
    for (int j = 16 * s; j < 16 * s + 16; ++j) y[j] = dl * f(q2_k_quant(b, j)) - ml;
  }
}

void dequantize_block(const BlockQ3_K& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int s = 0; s < kQK_K / 16; ++s) {
    const float dl = d * f(q3_k_scale(b, s) - 32);
    for (int j = 16 * s; j < 16 * s + 16; ++j) y[j] = dl * f(q3_k_quant(b, j));
  }
}

void dequantize_block(const BlockQ4_K& b, float* y) { dequantize_k4<BlockQ4_K, q4_k_quant>(b, y); }

void dequantize_block(const BlockQ5_K& b, float* y) { dequantize_k4<BlockQ5_K, q5_k_quant>(b, y); }

void dequantize_block(const BlockQ6_K& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int s = 0; s < kQK_K / 16; ++s) {
    const float dl = d * f(b.scales[s]);
    for (int j = 16 * s; j < 16 * s + 16; ++j) y[j] = dl * f(q6_k_quant(b, j));
  }
}

void dequantize_block(const BlockQ8_K& b, float* y) {
  for (int j = 0; j < kQK_K; ++j) y[j] = b.d * f(b.qs[j]);
}

}  // namespace duet::blocks
