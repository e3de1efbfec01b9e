// cuda_ops.h — the ops of duet/ops.h as CUDA kernels.
//
// Each op becomes one command (commands.h) handed to the forward pass,
// which launches it at once outside a pass and queues it inside one.
// matmul with fewer than `matmul_min_rows` rows of activations is a gemv
// over the stored weights (gemv.cu); with more it goes to cuBLAS (gemm.h).
// Weights may be f32,
// f16, bf16, q4_0, q4_1 or q8_0; everything else is f32. Reductions
// accumulate in f32 (the reference uses double); RoPE angles are double.
#pragma once

#include <cstdint>

#include "duet/ops.h"
#include "forward_pass.h"

namespace duet::cuda {

class CudaOps final : public Ops {
 public:
  // REQUIRES: matmul_min_rows >= 1 (the backend's option of that name).
  CudaOps(ForwardPass& pass, int64_t matmul_min_rows)
      : pass_(pass), matmul_min_rows_(matmul_min_rows) {}

  Support supports(const OpDesc& desc) const override;
  void embedding(const TensorView& table, const TensorView& ids, TensorView out) override;
  void matmul(const TensorView& x, const TensorView& w, TensorView out) override;
  void rmsnorm(const TensorView& x, const TensorView& weight, float eps, TensorView out) override;
  void rope(TensorView x, const TensorView& positions, const RopeParams& params) override;
  void swiglu(const TensorView& gate, const TensorView& up, TensorView out) override;
  void add(const TensorView& a, const TensorView& b, TensorView out) override;
  void add_bias(const TensorView& x, const TensorView& bias, TensorView out) override;
  void geglu(const TensorView& gate, const TensorView& up, TensorView out) override;
  void scale(const TensorView& x, float factor, TensorView out) override;

 private:
  ForwardPass& pass_;
  int64_t matmul_min_rows_;
};

}  // namespace duet::cuda
