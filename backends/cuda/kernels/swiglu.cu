// swiglu.cu — silu(gate) * up and gelu(gate) * up, one thread per element
// (grid-stride).
#include "common.cuh"

namespace duet::cuda {
namespace {

constexpr int kThreads = 256;

// silu(g) = g / (1 + exp(-g)); for very negative g exp overflows to inf and
// the quotient is the correct limit, -0.
__global__ void swiglu_kernel(const float* gate, const float* up, int64_t n, float* out) {
  wait_for_previous_kernel();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += stride) {
    const float g = gate[i];
    out[i] = g / (1.0f + expf(-g)) * up[i];
  }
}

// gelu(g) = g/2 · (1 + tanh(√(2/π) · (g + 0.044715 g³))), in double as the
// reference computes it.
__global__ void geglu_kernel(const float* gate, const float* up, int64_t n, float* out) {
  wait_for_previous_kernel();
  const double k = 0.7978845608028654;  // √(2/π)
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += stride) {
    const double g = gate[i];
    out[i] = static_cast<float>(0.5 * g * (1.0 + tanh(k * (g + 0.044715 * g * g * g))) * up[i]);
  }
}

}  // namespace

cudaError_t launch_geglu(const LaunchConfig& at, const float* gate, const float* up, int64_t n,
                         float* out) {
  if (n == 0) return cudaSuccess;
  return launch(geglu_kernel, dim3(grid_for(n, kThreads)), dim3(kThreads), 0, at, gate, up, n, out);
}

cudaError_t launch_swiglu(const LaunchConfig& at, const float* gate, const float* up, int64_t n,
                          float* out) {
  if (n == 0) return cudaSuccess;
  return launch(swiglu_kernel, dim3(grid_for(n, kThreads)), dim3(kThreads), 0, at, gate, up, n,
                out);
}

}  // namespace duet::cuda
