// The iq4_nl quantizer of block_quantize.h. The float operations are ggml's,
// in ggml's order (core is built without contraction into FMA), so the bytes
// equal those of ggml's reference quantizer as llama-quantize runs it
// without an importance matrix (tests/data/kquant_vectors.gguf holds ggml's
// own bytes; tests/quant_test.cc compares them).
#include <cmath>
#include <cstring>

#include "duet/quant.h"
#include "gguf/block_quantize.h"

namespace duet::blocks {
namespace {

// Below this largest magnitude a block counts as all zeros.
constexpr float kZeroGroup = 1e-15f;
// Candidate scales on each side of the first: -max / (127 - i), i = -7..7.
constexpr int kTries = 7;

float level(int q) { return static_cast<float>(kIQ4NLLevels[static_cast<size_t>(q)]); }

// The index of the level nearest v, the lower one where v is halfway, found
// by bisection.
int nearest_level(float v) {
  if (v <= level(0)) return 0;
  if (v >= level(15)) return 15;
  int lo = 0, hi = 15;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (v < level(mid))
      hi = mid;
    else
      lo = mid;
  }
  return v - level(hi - 1) < level(hi) - v ? hi - 1 : hi;
}

// Σ w x q and Σ w q² with every element at its nearest level for 1 / scale
// `inv`, weights w = x².
void fit_sums(const float* x, float inv, float& sum_qx, float& sum_q2) {
  sum_qx = 0.0f;
  sum_q2 = 0.0f;
  for (int j = 0; j < kQK; ++j) {
    const float q = level(nearest_level(inv * x[j]));
    const float w = x[j] * x[j];
    sum_qx += w * q * x[j];
    sum_q2 += w * q * q;
  }
}

}  // namespace

BlockIQ4_NL quantize_iq4_nl(const float* x) {
  const float vmax = signed_absmax(x, kQK);
  float scale = 0.0f;
  if (std::fabs(vmax) >= kZeroGroup) {
    float sum_qx = 0.0f, sum_q2 = 0.0f;
    fit_sums(x, 1.0f / (-vmax / level(0)), sum_qx, sum_q2);
    scale = sum_q2 > 0.0f ? sum_qx / sum_q2 : 0.0f;
    float best = scale * sum_qx;
    for (int i = -kTries; i <= kTries; ++i) {
      fit_sums(x, static_cast<float>(i + kIQ4NLLevels[0]) / vmax, sum_qx, sum_q2);
      if (sum_q2 > 0.0f && sum_qx * sum_qx > best * sum_q2) {
        scale = sum_qx / sum_q2;
        best = scale * sum_qx;
      }
    }
  }
  BlockIQ4_NL out;
  out.d = f32_to_f16(scale);
  const float inv = scale != 0.0f ? 1.0f / scale : 0.0f;
  for (int j = 0; j < kQK / 2; ++j) {
    out.qs[j] =
        static_cast<uint8_t>(nearest_level(inv * x[j]) | nearest_level(inv * x[j + kQK / 2]) << 4);
  }
  return out;
}

}  // namespace duet::blocks
