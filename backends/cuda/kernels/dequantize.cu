// dequantize.cu — expands weights to f16 or f32 for cuBLAS (prefill
// matmuls), and rounds activations to f16.
#include <cuda_fp16.h>

#include "common.cuh"
#include "formats.cuh"

namespace duet::cuda {
namespace {

constexpr int kThreads = 256;

// One thread per element, grid-stride.
template <DType T, typename Out>
__global__ void dequantize_kernel(const uint8_t* w, int64_t rows, int64_t cols, Out* out) {
  wait_for_previous_kernel();
  const int64_t total = rows * cols;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total; i += stride) {
    const float v = Format<T>::element(w + (i / cols) * row_bytes<T>(cols), i % cols);
    if constexpr (sizeof(Out) == 2) {
      out[i] = __float2half_rn(v);
    } else {
      out[i] = v;
    }
  }
}

__global__ void to_f16_kernel(const float* x, int64_t n, __half* out) {
  wait_for_previous_kernel();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += stride)
    out[i] = __float2half_rn(x[i]);
}

}  // namespace

cudaError_t launch_dequantize(const LaunchConfig& at, const void* w, DType dtype, int64_t rows,
                              int64_t cols, bool to_f16, void* out) {
  const int64_t total = rows * cols;
  if (total == 0) return cudaSuccess;
  const auto* bytes = static_cast<const uint8_t*>(w);
  return dispatch_format(dtype, [&]<DType T>() {
    const dim3 grid(grid_for(total, kThreads));
    if (to_f16) {
      return launch(dequantize_kernel<T, __half>, grid, dim3(kThreads), 0, at, bytes, rows, cols,
                    static_cast<__half*>(out));
    }
    return launch(dequantize_kernel<T, float>, grid, dim3(kThreads), 0, at, bytes, rows, cols,
                  static_cast<float*>(out));
  });
}

cudaError_t launch_to_f16(const LaunchConfig& at, const float* x, int64_t n, void* out) {
  if (n == 0) return cudaSuccess;
  return launch(to_f16_kernel, dim3(grid_for(n, kThreads)), dim3(kThreads), 0, at, x, n,
                static_cast<__half*>(out));
}

}  // namespace duet::cuda
