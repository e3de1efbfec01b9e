#include "cuda_ops.h"

#include <string>

namespace duet::cuda {
namespace {

// The weight types the embedding and matmul kernels read (kernels/formats.cuh).
constexpr DType kWeightTypes[] = {DType::kF32,  DType::kF16,   DType::kBF16, DType::kQ4_0,
                                  DType::kQ4_1, DType::kQ5_0,  DType::kQ5_1, DType::kQ8_0,
                                  DType::kQ2_K, DType::kQ3_K,  DType::kQ4_K, DType::kQ5_K,
                                  DType::kQ6_K, DType::kIQ4_NL};

}  // namespace

Support CudaOps::supports(const OpDesc& desc) const {
  return weight_op_support("cuda", desc, kWeightTypes);
}

void CudaOps::embedding(const TensorView& table, const TensorView& ids, TensorView out) {
  pass_.submit(EmbeddingCall{table.data, table.dtype, table.shape[1], ids.as<const int32_t>(),
                             ids.shape[0], out.as<float>()});
}

void CudaOps::matmul(const TensorView& x, const TensorView& w, TensorView out) {
  const int64_t n = x.shape[0];
  const int64_t k = x.shape[1];
  const int64_t m = w.shape[0];
  if (n < matmul_min_rows_) {
    GemvCall g{x.as<const float>(), k, w.dtype, {}, 1, static_cast<int32_t>(n)};
    g.segments[0] = GemvSegment{w.data, out.as<float>(), m};
    pass_.submit(g);
  } else {
    pass_.submit(GemmCall{x.as<const float>(), w.data, w.dtype, n, m, k, out.as<float>()});
  }
}

void CudaOps::rmsnorm(const TensorView& x, const TensorView& weight, float eps, TensorView out) {
  pass_.submit(RmsNormCall{x.as<const float>(), weight.as<const float>(), eps, x.shape.rows(),
                           x.shape.innermost(), out.as<float>()});
}

void CudaOps::rope(TensorView x, const TensorView& positions, const RopeParams& params) {
  RopeCall r;
  r.first = RopeTarget{x.as<float>(), static_cast<int32_t>(x.shape[1])};
  r.positions = positions.as<const int32_t>();
  r.rows = x.shape[0];
  r.head_dim = static_cast<int32_t>(x.shape[2]);
  r.theta_base = params.theta_base;
  r.halves = params.pairs == RopeParams::Pairs::kHalves;
  r.freq_factors = params.freq_factors.data ? params.freq_factors.as<const float>() : nullptr;
  pass_.submit(r);
}

void CudaOps::swiglu(const TensorView& gate, const TensorView& up, TensorView out) {
  pass_.submit(
      SwiGLUCall{gate.as<const float>(), up.as<const float>(), gate.elements(), out.as<float>()});
}

void CudaOps::add(const TensorView& a, const TensorView& b, TensorView out) {
  pass_.submit(AddCall{a.as<const float>(), b.as<const float>(), a.elements(), out.as<float>()});
}

void CudaOps::add_bias(const TensorView& x, const TensorView& bias, TensorView out) {
  pass_.submit(AddBiasCall{x.as<const float>(), bias.as<const float>(), x.shape[0], x.shape[1],
                           out.as<float>()});
}

void CudaOps::geglu(const TensorView& gate, const TensorView& up, TensorView out) {
  pass_.submit(
      GeGLUCall{gate.as<const float>(), up.as<const float>(), gate.elements(), out.as<float>()});
}

void CudaOps::scale(const TensorView& x, float factor, TensorView out) {
  pass_.submit(ScaleCall{x.as<const float>(), factor, x.elements(), out.as<float>()});
}

}  // namespace duet::cuda
