#include "reference_ops.h"

#include <cmath>
#include <cstdint>
#include <numbers>
#include <string>
#include <vector>

#include "duet/quant.h"

namespace duet::reference {
namespace {

// Every weight type duet::dequantize_row expands.
constexpr DType kWeightTypes[] = {DType::kF32,  DType::kF16,   DType::kBF16, DType::kQ4_0,
                                  DType::kQ4_1, DType::kQ5_0,  DType::kQ5_1, DType::kQ8_0,
                                  DType::kQ2_K, DType::kQ3_K,  DType::kQ4_K, DType::kQ5_K,
                                  DType::kQ6_K, DType::kIQ4_NL};

// Start of row `r` of a row-major tensor whose rows are `row_bytes` long.
const uint8_t* row_ptr(const TensorView& t, int64_t r, uint64_t row_bytes) {
  return static_cast<const uint8_t*>(t.data) + static_cast<uint64_t>(r) * row_bytes;
}

}  // namespace

Support ReferenceOps::supports(const OpDesc& desc) const {
  return weight_op_support("reference", desc, kWeightTypes);
}

void ReferenceOps::embedding(const TensorView& table, const TensorView& ids, TensorView out) {
  const int64_t n = ids.shape[0];
  const int64_t dim = table.shape[1];
  const uint64_t row_bytes = *dtype_row_bytes(table.dtype, static_cast<uint64_t>(dim));
  for (int64_t i = 0; i < n; ++i) {
    dequantize_row(table.dtype, row_ptr(table, ids.as<int32_t>()[i], row_bytes),
                   out.as<float>() + i * dim, dim);
  }
}

void ReferenceOps::matmul(const TensorView& x, const TensorView& w, TensorView out) {
  const int64_t n = x.shape[0];
  const int64_t k = x.shape[1];
  const int64_t m = w.shape[0];
  const uint64_t row_bytes = *dtype_row_bytes(w.dtype, static_cast<uint64_t>(k));
  // Weight rows outermost: each is expanded once into `wrow` and used for
  // every row of x, so a quantized matrix is never expanded whole.
  std::vector<float> wrow(static_cast<size_t>(k));
  for (int64_t j = 0; j < m; ++j) {
    dequantize_row(w.dtype, row_ptr(w, j, row_bytes), wrow.data(), k);
    for (int64_t i = 0; i < n; ++i) {
      const float* xi = x.as<const float>() + i * k;
      double acc = 0.0;
      for (int64_t c = 0; c < k; ++c)
        acc += static_cast<double>(xi[c]) * wrow[static_cast<size_t>(c)];
      out.as<float>()[i * m + j] = static_cast<float>(acc);
    }
  }
}

void ReferenceOps::rmsnorm(const TensorView& x, const TensorView& weight, float eps,
                           TensorView out) {
  const int64_t n = x.shape[0];
  const int64_t d = x.shape[1];
  const float* w = weight.as<const float>();
  for (int64_t i = 0; i < n; ++i) {
    const float* xi = x.as<const float>() + i * d;
    float* oi = out.as<float>() + i * d;  // may be xi: every x is read before it is written
    double sum_sq = 0.0;
    for (int64_t c = 0; c < d; ++c) sum_sq += static_cast<double>(xi[c]) * xi[c];
    const double scale = 1.0 / std::sqrt(sum_sq / static_cast<double>(d) + eps);
    for (int64_t c = 0; c < d; ++c) oi[c] = static_cast<float>(xi[c] * scale * w[c]);
  }
}

void ReferenceOps::rope(TensorView x, const TensorView& positions, const RopeParams& params) {
  const int64_t n = x.shape[0];
  const int64_t heads = x.shape[1];
  const int64_t head_dim = x.shape[2];
  const int64_t half = head_dim / 2;
  for (int64_t i = 0; i < n; ++i) {
    const double pos = positions.as<const int32_t>()[i];
    for (int64_t h = 0; h < heads; ++h) {
      float* v = x.as<float>() + (i * heads + h) * head_dim;
      for (int64_t j = 0; j < half; ++j) {
        const double factor =
            params.freq_factors.data ? double{params.freq_factors.as<const float>()[j]} : 1.0;
        const double angle =
            pos *
            std::pow(static_cast<double>(params.theta_base),
                     -2.0 * static_cast<double>(j) / static_cast<double>(head_dim)) /
            factor;
        const bool adjacent = params.pairs == RopeParams::Pairs::kAdjacent;
        float& a = v[adjacent ? 2 * j : j];
        float& b = v[adjacent ? 2 * j + 1 : j + half];
        const double c = std::cos(angle);
        const double s = std::sin(angle);
        const double ra = a * c - b * s;
        const double rb = a * s + b * c;
        a = static_cast<float>(ra);
        b = static_cast<float>(rb);
      }
    }
  }
}

void ReferenceOps::swiglu(const TensorView& gate, const TensorView& up, TensorView out) {
  const int64_t n = gate.elements();
  for (int64_t i = 0; i < n; ++i) {
    const double g = gate.as<const float>()[i];
    const double silu = g / (1.0 + std::exp(-g));
    out.as<float>()[i] = static_cast<float>(silu * up.as<const float>()[i]);
  }
}

void ReferenceOps::add(const TensorView& a, const TensorView& b, TensorView out) {
  const int64_t n = a.elements();
  for (int64_t i = 0; i < n; ++i)
    out.as<float>()[i] = a.as<const float>()[i] + b.as<const float>()[i];
}

void ReferenceOps::add_bias(const TensorView& x, const TensorView& bias, TensorView out) {
  const int64_t rows = x.shape[0], cols = x.shape[1];
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      out.as<float>()[r * cols + c] = x.as<const float>()[r * cols + c] + bias.as<const float>()[c];
    }
  }
}

void ReferenceOps::geglu(const TensorView& gate, const TensorView& up, TensorView out) {
  const double k = std::sqrt(2.0 / std::numbers::pi);
  const int64_t n = gate.elements();
  for (int64_t i = 0; i < n; ++i) {
    const double g = gate.as<const float>()[i];
    const double gelu = 0.5 * g * (1.0 + std::tanh(k * (g + 0.044715 * g * g * g)));
    out.as<float>()[i] = static_cast<float>(gelu * up.as<const float>()[i]);
  }
}

void ReferenceOps::scale(const TensorView& x, float factor, TensorView out) {
  const int64_t n = x.elements();
  for (int64_t i = 0; i < n; ++i) out.as<float>()[i] = x.as<const float>()[i] * factor;
}

}  // namespace duet::reference
