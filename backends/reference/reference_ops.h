// reference_ops.h — the ops of duet/ops.h in plain, single-threaded C++.
//
// This is the yardstick every other backend is compared against, so each op
// is written as directly from its formula as possible: reductions accumulate
// in double, rope angles are computed in double, and a quantized weight is
// expanded one row at a time with dequantize_row(). Weights may be f32, f16,
// bf16, q4_0, q4_1 or q8_0; everything else is f32.
#pragma once

#include "duet/ops.h"

namespace duet::reference {

class ReferenceOps final : public Ops {
 public:
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
};

}  // namespace duet::reference
