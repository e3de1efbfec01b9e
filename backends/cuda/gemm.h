// gemm.h — matmuls with more than one row of activations (prefill), on
// cuBLAS tensor cores.
//
// out[n, m] = x[n, k] · w[m, k]ᵀ. Quantized weights (every block format:
// q4_0 ... q8_0 and the K-quants) are expanded to f16, the activations rounded to f16, and
// cublasGemmEx multiplies with f32 accumulation into the f32 output on tensor cores: the f16
// rounding of x costs a relative error of about 3e-4 per element, well below what 2- to 8-bit
// weights already cost. Float weights (f32, f16, bf16) promise float accuracy, so they are
// multiplied in f32 (f16 and bf16 expanded to f32 first). The expanded weights live in one scratch
// panel of at most kPanelBytes reused by every matmul: a larger matrix is processed in row panels,
// each expanded and multiplied in turn.
#pragma once

#include <cublas_v2.h>

#include <cstdint>
#include <memory>

#include "commands.h"
#include "cuda_device.h"
#include "kernels.h"

namespace duet::cuda {

class Gemm {
 public:
  explicit Gemm(CudaDevice& device) : device_(device) {}
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // Queues the product on the device's stream. Allocates scratch and
  // creates the cuBLAS handle on first use, so it must not be called while
  // the stream is being captured. Throws duet::Error(kPlugin) on a CUDA or
  // cuBLAS failure and kOutOfMemory when the scratch does not fit.
  void run(const GemmCall& call, const LaunchConfig& at);

  static constexpr uint64_t kPanelBytes = uint64_t{64} << 20;

 private:
  // A scratch buffer of at least `bytes`, reallocated (after the queued
  // work that may read the old one) when too small.
  void* scratch(std::unique_ptr<Buffer>& buffer, uint64_t bytes);

  CudaDevice& device_;
  cublasHandle_t handle_ = nullptr;
  std::unique_ptr<Buffer> panel_;        // expanded weight rows
  std::unique_ptr<Buffer> activations_;  // x in f16
};

}  // namespace duet::cuda
