// rope.cu — rotary position embedding of one or two tensors (Q and K of a
// layer share the positions, so they rotate in one launch).
#include "common.cuh"

namespace duet::cuda {
namespace {

constexpr int kThreads = 256;

// One thread per (row, head, pair). The angle and its sine and cosine are
// computed in double, as the reference does: at position 8000 a float angle
// would already be off by about 1e-3 radians.
__global__ void rope_kernel(RopeTarget first, RopeTarget second, const int32_t* positions,
                            int64_t rows, int32_t head_dim, double theta_base, bool halves,
                            const float* freq_factors) {
  wait_for_previous_kernel();
  const int32_t half = head_dim / 2;
  const int32_t heads = first.heads + second.heads;
  const int64_t total = rows * heads * half;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; idx < total; idx += stride) {
    const int32_t j = static_cast<int32_t>(idx % half);
    const int32_t head = static_cast<int32_t>(idx / half % heads);
    const int64_t row = idx / half / heads;
    const bool in_first = head < first.heads;
    const RopeTarget& t = in_first ? first : second;
    float* v = t.x + (row * t.heads + (in_first ? head : head - first.heads)) * head_dim;
    const double angle = static_cast<double>(positions[row]) *
                         pow(theta_base, -2.0 * j / static_cast<double>(head_dim)) /
                         (freq_factors ? static_cast<double>(freq_factors[j]) : 1.0);
    double s = 0.0;
    double c = 0.0;
    sincos(angle, &s, &c);
    float& a = v[halves ? j : 2 * j];
    float& b = v[halves ? j + half : 2 * j + 1];
    const double ra = a * c - b * s;
    const double rb = a * s + b * c;
    a = static_cast<float>(ra);
    b = static_cast<float>(rb);
  }
}

}  // namespace

cudaError_t launch_rope(const LaunchConfig& at, RopeTarget first, RopeTarget second,
                        const int32_t* positions, int64_t rows, int32_t head_dim, float theta_base,
                        bool halves, const float* freq_factors) {
  if (second.x == nullptr) second.heads = 0;
  const int64_t total = rows * (first.heads + second.heads) * (head_dim / 2);
  if (total == 0) return cudaSuccess;
  return launch(rope_kernel, dim3(grid_for(total, kThreads)), dim3(kThreads), 0, at, first, second,
                positions, rows, head_dim, static_cast<double>(theta_base), halves, freq_factors);
}

}  // namespace duet::cuda
