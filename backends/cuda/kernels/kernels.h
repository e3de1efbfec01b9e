// kernels.h — the CUDA kernels, as host functions.
//
// Each launcher queues its kernel on `at.stream` and returns the launch's
// error code (cudaSuccess, or why the launch was refused) without waiting
// for the kernel. Pointers are device pointers, sizes are in elements, and
// the preconditions of duet/ops.h hold (core checked them). Launchers may be
// called while the stream is being captured into a CUDA graph: none of them
// allocates, copies or synchronises.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "duet/dtype.h"
#include "kernel_args.h"

namespace duet::cuda {

struct LaunchConfig {
  cudaStream_t stream = nullptr;
  // Programmatic dependent launch (sm_90+): the kernel may be scheduled
  // while the previous one finishes and waits for it on the device (every
  // kernel starts with wait_for_previous_kernel(), see common.cuh).
  bool pdl = false;
};

// out[i, :] = dequantize(table[ids[i], :]); table [vocab, dim] of `dtype`.
cudaError_t launch_embedding(const LaunchConfig& at, const void* table, DType dtype, int64_t dim,
                             const int32_t* ids, int64_t n, float* out);

// out[i, :] = x[i, :] / sqrt(mean(x[i, :]²) + eps) * weight; out may be x.
cudaError_t launch_rmsnorm(const LaunchConfig& at, const float* x, const float* weight, float eps,
                           int64_t rows, int64_t dim, float* out);

// sum = a + b, then out = rmsnorm(sum, weight, eps), row by row: add()
// followed by rmsnorm() of its result, in one pass. sum may be a or b; out
// may be sum or lie apart from a, b and sum.
cudaError_t launch_add_rmsnorm(const LaunchConfig& at, const float* a, const float* b, float* sum,
                               const float* weight, float eps, int64_t rows, int64_t dim,
                               float* out);

// Rotates `first` and, when second.x is not null, `second` in place (RoPE
// as in duet/ops.h, pair j's angle divided by freq_factors[j] when not
// null); both have `rows` rows at positions[row].
cudaError_t launch_rope(const LaunchConfig& at, RopeTarget first, RopeTarget second,
                        const int32_t* positions, int64_t rows, int32_t head_dim, float theta_base,
                        bool halves, const float* freq_factors);

// out = silu(gate) * up over n elements; out may be gate or up.
cudaError_t launch_swiglu(const LaunchConfig& at, const float* gate, const float* up, int64_t n,
                          float* out);

// out = a + b over n elements; out may be a or b.
cudaError_t launch_add(const LaunchConfig& at, const float* a, const float* b, int64_t n,
                       float* out);

// out[r, :] = x[r, :] + bias over `rows` rows of `dim`; out may be x.
cudaError_t launch_add_bias(const LaunchConfig& at, const float* x, const float* bias, int64_t rows,
                            int64_t dim, float* out);

// out = gelu(gate) * up over n elements (the tanh form of GELU, duet/ops.h);
// out may be gate or up.
cudaError_t launch_geglu(const LaunchConfig& at, const float* gate, const float* up, int64_t n,
                         float* out);

// out = x * factor over n elements; out may be x.
cudaError_t launch_scale(const LaunchConfig& at, const float* x, float factor, int64_t n,
                         float* out);

// For each of the first `count` segments: out[i, r] = w[r, :] · x[i, :],
// w [rows, cols] of `dtype` (f32, f16, bf16, q4_0, q4_1, q8_0), x [x_rows,
// cols], out [x_rows, rows], f32 accumulation. The decode-time matmul: a
// weight is read from memory once per kGemvChunkRows rows of x, and row i's
// result does not depend on x_rows (kernel_args.h).
cudaError_t launch_gemv(const LaunchConfig& at, const float* x, int64_t cols, int64_t x_rows,
                        DType dtype, const GemvSegments& segments, int count);

// gate = x · w_gateᵀ and up = x · w_upᵀ (weights [rows, cols] of `dtype`,
// x [x_rows, cols], gate and up [x_rows, rows]), then silu(gate) * up
// stored into gate (`into_gate`) or up: gemv, gemv and swiglu in one
// launch, leaving memory exactly as the three would.
cudaError_t launch_gemv_swiglu(const LaunchConfig& at, const float* x, int64_t cols, int64_t x_rows,
                               DType dtype, const void* w_gate, const void* w_up, int64_t rows,
                               float* gate, float* up, bool into_gate);

// Expands rows [0, rows) of w ([rows, cols] of `dtype`) to f16 (`to_f16`)
// or f32 at out, for a cuBLAS product.
cudaError_t launch_dequantize(const LaunchConfig& at, const void* w, DType dtype, int64_t rows,
                              int64_t cols, bool to_f16, void* out);

// out = x rounded to f16, over n elements.
cudaError_t launch_to_f16(const LaunchConfig& at, const float* x, int64_t n, void* out);

// Copies each row's new K and V into its cache slot (see KvStoreArgs).
cudaError_t launch_kv_store(const LaunchConfig& at, const KvStoreArgs& args);

// Causal attention over the cache (see AttentionArgs), storing decode rows'
// K/V when args.k_new is set. REQUIRES: head_dim <= kMaxAttentionHeadDim,
// n_heads a multiple of n_kv_heads.
cudaError_t launch_attention(const LaunchConfig& at, const AttentionArgs& args);

// launch_attention's path for args.tiled (prefill_attention.cu). REQUIRES:
// head_dim <= kMaxTiledHeadDim; rows first_row.. are one sequence's, in
// positional order.
cudaError_t launch_tiled_attention(const LaunchConfig& at, const AttentionArgs& args);

}  // namespace duet::cuda
