// add.cu — elementwise sum and bias rows, one thread per element (grid-stride).
#include "common.cuh"

namespace duet::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void add_kernel(const float* a, const float* b, int64_t n, float* out) {
  wait_for_previous_kernel();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += stride)
    out[i] = a[i] + b[i];
}

__global__ void add_bias_kernel(const float* x, const float* bias, int64_t n, int64_t dim,
                                float* out) {
  wait_for_previous_kernel();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += stride)
    out[i] = x[i] + bias[i % dim];
}

}  // namespace

cudaError_t launch_add_bias(const LaunchConfig& at, const float* x, const float* bias, int64_t rows,
                            int64_t dim, float* out) {
  const int64_t n = rows * dim;
  if (n == 0) return cudaSuccess;
  return launch(add_bias_kernel, dim3(grid_for(n, kThreads)), dim3(kThreads), 0, at, x, bias, n,
                dim, out);
}

cudaError_t launch_add(const LaunchConfig& at, const float* a, const float* b, int64_t n,
                       float* out) {
  if (n == 0) return cudaSuccess;
  return launch(add_kernel, dim3(grid_for(n, kThreads)), dim3(kThreads), 0, at, a, b, n, out);
}

}  // namespace duet::cuda
