// scale.cu — x times a constant, one thread per element (grid-stride).
#include "common.cuh"

namespace duet::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void scale_kernel(const float* x, float factor, int64_t n, float* out) {
  wait_for_previous_kernel();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += stride)
    out[i] = x[i] * factor;
}

}  // namespace

cudaError_t launch_scale(const LaunchConfig& at, const float* x, float factor, int64_t n,
                         float* out) {
  if (n == 0) return cudaSuccess;
  return launch(scale_kernel, dim3(grid_for(n, kThreads)), dim3(kThreads), 0, at, x, factor, n,
                out);
}

}  // namespace duet::cuda
