// rmsnorm.cu — RMSNorm, alone and fused with the residual add before it.
#include "common.cuh"

namespace duet::cuda {
namespace {

constexpr int kThreads = 256;

// One block per row. Every element is read and written by the same thread,
// so out may alias x.
__global__ void rmsnorm_kernel(const float* x, const float* weight, float eps, int64_t dim,
                               float* out) {
  wait_for_previous_kernel();
  const float* xr = x + blockIdx.x * dim;
  float* o = out + blockIdx.x * dim;
  float sum_sq = 0.0f;
  for (int64_t c = threadIdx.x; c < dim; c += kThreads) sum_sq += xr[c] * xr[c];
  const float scale = rsqrtf(block_sum(sum_sq) / static_cast<float>(dim) + eps);
  for (int64_t c = threadIdx.x; c < dim; c += kThreads) o[c] = xr[c] * scale * weight[c];
}

// sum = a + b, out = rmsnorm(sum). The second loop re-reads `sum` (written
// by the same thread) rather than a + b, because sum may alias a or b.
__global__ void add_rmsnorm_kernel(const float* a, const float* b, float* sum, const float* weight,
                                   float eps, int64_t dim, float* out) {
  wait_for_previous_kernel();
  const int64_t base = blockIdx.x * dim;
  float sum_sq = 0.0f;
  for (int64_t c = threadIdx.x; c < dim; c += kThreads) {
    const float s = a[base + c] + b[base + c];
    sum[base + c] = s;
    sum_sq += s * s;
  }
  const float scale = rsqrtf(block_sum(sum_sq) / static_cast<float>(dim) + eps);
  for (int64_t c = threadIdx.x; c < dim; c += kThreads)
    out[base + c] = sum[base + c] * scale * weight[c];
}

}  // namespace

cudaError_t launch_rmsnorm(const LaunchConfig& at, const float* x, const float* weight, float eps,
                           int64_t rows, int64_t dim, float* out) {
  if (rows == 0) return cudaSuccess;
  return launch(rmsnorm_kernel, dim3(static_cast<unsigned int>(rows)), dim3(kThreads), 0, at, x,
                weight, eps, dim, out);
}

cudaError_t launch_add_rmsnorm(const LaunchConfig& at, const float* a, const float* b, float* sum,
                               const float* weight, float eps, int64_t rows, int64_t dim,
                               float* out) {
  if (rows == 0) return cudaSuccess;
  return launch(add_rmsnorm_kernel, dim3(static_cast<unsigned int>(rows)), dim3(kThreads), 0, at, a,
                b, sum, weight, eps, dim, out);
}

}  // namespace duet::cuda
