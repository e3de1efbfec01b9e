// Portable kernels: the semantics every SIMD path must reproduce, and the
// fallback for CPUs without AVX2. One weight block at a time, integer dot
// product per block, exactly the formulas of qgemv.h.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "duet/block_formats.h"
#include "duet/quant.h"
#include "kernels/qgemv_paths.h"

namespace duet::onednn::detail {
namespace {

constexpr int64_t kBlock = duet::blocks::kQK;
using duet::blocks::BlockQ4_0;
using duet::blocks::BlockQ4_1;
using duet::blocks::BlockQ8_0;

float load_f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof h);
  return f16_to_f32(h);
}

// Σ qw*qx over one 4-bit block: qs[j] holds element j (low nibble) and j + 16.
int32_t dot_q4(const uint8_t* qs, const int8_t* qx) {
  int32_t sum = 0;
  for (int j = 0; j < kBlock / 2; ++j) {
    sum += (qs[j] & 0x0f) * qx[j] + (qs[j] >> 4) * qx[j + kBlock / 2];
  }
  return sum;
}

int32_t dot_q8(const int8_t* qw, const int8_t* qx) {
  int32_t sum = 0;
  for (int j = 0; j < kBlock; ++j) sum += qw[j] * qx[j];
  return sum;
}

// A block's integer sum over all terms of xq: Σ(qw*q), or with two terms
// 256*Σ(qw*q) + Σ(qw*q_lo) (qgemv.h). With two terms it can exceed 2^24, so
// its conversion to float rounds here, where the SIMD paths convert smaller
// per-lane sums exactly: the paths agree to float rounding, as qgemv.h says.
template <class Dot, class W>
int32_t block_sum(Dot dot, W w, const Q8Activations& xq, int64_t b) {
  const int32_t sum = dot(w, xq.q() + b * kBlock);
  if (xq.terms() == 1) return sum;
  return 256 * sum + dot(w, xq.q_lo() + b * kBlock);
}

float row_q4(DType wtype, const uint8_t* row, const Q8Activations& xq) {
  const float* sx = xq.scales();
  const bool has_min = wtype == DType::kQ4_1;
  const int64_t block_bytes = has_min ? sizeof(BlockQ4_1) : sizeof(BlockQ4_0);
  const int64_t qs_offset = has_min ? offsetof(BlockQ4_1, qs) : offsetof(BlockQ4_0, qs);
  float acc = 0.0f;
  for (int64_t b = 0; b < xq.blocks(); ++b) {
    const uint8_t* blk = row + b * block_bytes;
    const float d = load_f16(blk + (has_min ? offsetof(BlockQ4_1, d) : offsetof(BlockQ4_0, d)));
    // q4_0 is q4_1 with the minimum fixed at -8d: d*(q - 8) = d*q + (-8d).
    const float m = has_min ? load_f16(blk + offsetof(BlockQ4_1, m)) : -8.0f * d;
    const auto isum = static_cast<float>(block_sum(dot_q4, blk + qs_offset, xq, b));
    acc += d * sx[2 * b] * isum + m * sx[2 * b + 1];
  }
  return acc;
}

float row_q8_0(const uint8_t* row, const Q8Activations& xq) {
  const float* sx = xq.scales();
  float acc = 0.0f;
  for (int64_t b = 0; b < xq.blocks(); ++b) {
    const uint8_t* blk = row + b * sizeof(BlockQ8_0);
    const auto* qs = reinterpret_cast<const int8_t*>(blk + offsetof(BlockQ8_0, qs));
    const auto isum = static_cast<float>(block_sum(dot_q8, qs, xq, b));
    acc += load_f16(blk + offsetof(BlockQ8_0, d)) * sx[2 * b] * isum;
  }
  return acc;
}

float row_f32(const uint8_t* row, const float* x, int64_t k) {
  float acc = 0.0f;
  for (int64_t c = 0; c < k; ++c) {
    float v;
    std::memcpy(&v, row + 4 * c, sizeof v);
    acc += v * x[c];
  }
  return acc;
}

float row_f16(const uint8_t* row, const float* x, int64_t k) {
  float acc = 0.0f;
  for (int64_t c = 0; c < k; ++c) acc += load_f16(row + 2 * c) * x[c];
  return acc;
}

}  // namespace

void gemv_scalar(const GemvArgs& a) {
  for (int64_t r = a.row_begin; r < a.row_end; ++r) {
    const uint8_t* row = a.w + r * a.row_bytes;
    switch (a.wtype) {
      case DType::kQ4_0:
      case DType::kQ4_1:
        a.y[r] = row_q4(a.wtype, row, *a.xq);
        break;
      case DType::kQ8_0:
        a.y[r] = row_q8_0(row, *a.xq);
        break;
      case DType::kF32:
        a.y[r] = row_f32(row, a.x, a.k);
        break;
      default:
        a.y[r] = row_f16(row, a.x, a.k);
        break;
    }
  }
}

void quantize_scalar(const float* x, int64_t k, int8_t* q, float* scales) {
  for (int64_t b = 0; b < k / kBlock; ++b) {
    const float* xb = x + b * kBlock;
    float amax = 0.0f;
    for (int j = 0; j < kBlock; ++j) amax = std::fmax(amax, std::fabs(xb[j]));
    const float d = amax / 127.0f;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    if (!std::isfinite(id)) id = 0.0f;  // d so small that 1 / d overflows: q = 0
    int32_t sum = 0;
    for (int j = 0; j < kBlock; ++j) {
      // lrint rounds in the current mode (to nearest, ties to even), as the
      // SIMD paths' float-to-int conversions do: the results are identical.
      const auto v = static_cast<int8_t>(std::lrint(xb[j] * id));
      q[b * kBlock + j] = v;
      sum += v;
    }
    scales[2 * b] = d;
    scales[2 * b + 1] = d * static_cast<float>(sum);
  }
}

}  // namespace duet::onednn::detail
