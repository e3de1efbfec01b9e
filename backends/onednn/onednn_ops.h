// onednn_ops.h — the ops of duet/ops.h on the host, multi-threaded.
//
// matmul is Matmul (onednn_matmul.h); SwiGLU uses the vector kernels;
// RMSNorm, RoPE, add, add_bias, GeGLU, scale and embedding are short loops
// the compiler vectorizes
// for baseline x86-64 — together they take a few percent of a forward pass;
// the first three split their rows across the pool when a prompt gives them
// enough (a decode step's single row stays on the calling thread).
// RoPE reads cos/sin from a table computed in double precision once per
// position, so its angles are as exact as the reference backend's.
// Weights may be f32, f16, bf16, q4_0, q4_1 or q8_0; everything else is f32.
// Thread-safety: none; one thread calls the ops at a time.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "duet/ops.h"
#include "onednn_matmul.h"
#include "thread_pool.h"
#include "vector_kernels.h"

namespace duet::onednn {

class OnednnOps final : public Ops {
 public:
  // REQUIRES: as Matmul's constructor. `batch_invariant`: every op computes
  // each row the same way whatever the number of rows (Matmul's, and
  // SwiGLU row by row, so that a row's tail elements never depend on n).
  OnednnOps(std::shared_ptr<ThreadPool> pool, CpuPath path, const BackendOptions& options,
            std::shared_ptr<RowTilesCache> tiles);

  Support supports(const OpDesc& desc) const override;
  void embedding(const TensorView& table, const TensorView& ids, TensorView out) override;
  void matmul(const TensorView& x, const TensorView& w, TensorView out) override;
  void matmuls(const TensorView& x, std::span<const TensorView> w,
               std::span<const TensorView> out) override;
  void rmsnorm(const TensorView& x, const TensorView& weight, float eps, TensorView out) override;
  void rope(TensorView x, const TensorView& positions, const RopeParams& params) override;
  void swiglu(const TensorView& gate, const TensorView& up, TensorView out) override;
  void add(const TensorView& a, const TensorView& b, TensorView out) override;
  void add_bias(const TensorView& x, const TensorView& bias, TensorView out) override;
  void geglu(const TensorView& gate, const TensorView& up, TensorView out) override;
  void scale(const TensorView& x, float factor, TensorView out) override;

 private:
  using GatedKernel = void (*)(const float* gate, const float* up, float* out, int64_t n);
  // swiglu or geglu through `kernel`, split across the pool.
  void gated(GatedKernel kernel, const TensorView& gate, const TensorView& up, TensorView out);
  // fn(begin, end) over rows [0, rows) of row_elements each: on the calling
  // thread when there are few elements, else split across the pool.
  template <typename Fn>
  void for_rows(int64_t rows, int64_t row_elements, const Fn& fn);
  // cos and sin of position * theta^(-2j / head_dim) / factors[j],
  // interleaved: [position][j][cos, sin] for j < head_dim / 2, positions
  // [0, positions).
  struct RopeTable {
    float theta_base;
    int64_t head_dim;
    std::vector<float> factors;  // ones without frequency factors
    int64_t positions;
    std::vector<float> values;
  };
  static constexpr size_t kRopeTables = 4;
  // The table for these parameters (freq_factors: head_dim / 2 values or
  // null), grown to hold max_position.
  const std::vector<float>& rope_table(float theta_base, int64_t head_dim,
                                       const float* freq_factors, int32_t max_position);

  std::shared_ptr<ThreadPool> pool_;
  const VectorKernels& kernels_;
  bool batch_invariant_;
  Matmul matmul_;
  std::vector<RopeTable> rope_tables_;  // most recently added last
};

}  // namespace duet::onednn
