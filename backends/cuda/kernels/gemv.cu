// gemv.cu — matrix-vector products over stored weights: the decode-time
// matmul, where one row of activations meets every weight once and the
// speed is that of reading the weights.
//
// One warp per weight row, four rows per block. For a block format each lane
// takes whole 32-element blocks (lane, lane + 32, ...), so a warp reads a
// contiguous stretch of the row per step; for f32/f16/bf16 each lane takes
// single elements, which is coalesced as is. Partial sums are f32 and are
// reduced across the warp with shuffles. Up to kMaxGemvSegments matrices
// sharing x (Q, K, V; gate, up) run in one launch: the grid is their row
// blocks laid end to end.
#include "common.cuh"
#include "formats.cuh"

namespace duet::cuda {
namespace {

constexpr int kWarps = 4;

// std::array has no device member functions, hence plain arrays.
struct GemvGrid {
  GemvSegment segments[kMaxGemvSegments];
  int64_t first_block[kMaxGemvSegments + 1] = {};  // block index where segment s starts
  int count = 0;
};

// Loads x[0..31] (16-byte aligned when kAligned) into registers.
template <bool kAligned>
__device__ __forceinline__ void load32(const float* x, float (&v)[32]) {
  if constexpr (kAligned) {
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const float4 f = reinterpret_cast<const float4*>(x)[i];
      v[4 * i] = f.x;
      v[4 * i + 1] = f.y;
      v[4 * i + 2] = f.z;
      v[4 * i + 3] = f.w;
    }
  } else {
#pragma unroll
    for (int i = 0; i < 32; ++i) v[i] = x[i];
  }
}

// Row r of w ([rows, cols] of T) times x, summed over the warp; every lane
// gets the result.
template <DType T, bool kAligned>
__device__ __forceinline__ float row_dot(const void* w, int64_t r, const float* x, int64_t cols,
                                         int lane) {
  const uint8_t* row = static_cast<const uint8_t*>(w) + r * row_bytes<T>(cols);
  float acc = 0.0f;
  if constexpr (Format<T>::kBlocked) {
    float xv[32];
    for (int64_t b = lane; b < cols / 32; b += 32) {
      load32<kAligned>(x + 32 * b, xv);
      acc += Format<T>::dot(row + b * Format<T>::kBytes, xv);
    }
  } else {
    for (int64_t e = lane; e < cols; e += 32) acc += Format<T>::element(row, e) * x[e];
  }
  return warp_sum(acc);
}

template <DType T, bool kAligned>
__global__ void gemv_kernel(const float* x, int64_t cols, GemvGrid grid) {
  wait_for_previous_kernel();
  int s = 0;
  while (s + 1 < grid.count && blockIdx.x >= grid.first_block[s + 1]) ++s;
  const GemvSegment& seg = grid.segments[s];
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int64_t r = (blockIdx.x - grid.first_block[s]) * kWarps + threadIdx.x / 32;
  if (r >= seg.rows) return;  // uniform across the warp
  const float acc = row_dot<T, kAligned>(seg.w, r, x, cols, lane);
  if (lane == 0) seg.out[r] = acc;
}

// gate[r] = w_gate[r]·x and up[r] = w_up[r]·x, then silu(gate) * up into
// gate (into_gate) or up: exactly what gemv, gemv, swiglu leave in memory,
// computed with the same expressions, in one launch.
template <DType T, bool kAligned>
__global__ void gemv_swiglu_kernel(const float* x, int64_t cols, const void* w_gate,
                                   const void* w_up, int64_t rows, float* gate, float* up,
                                   bool into_gate) {
  wait_for_previous_kernel();
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (r >= rows) return;  // uniform across the warp
  const float g = row_dot<T, kAligned>(w_gate, r, x, cols, lane);
  const float u = row_dot<T, kAligned>(w_up, r, x, cols, lane);
  if (lane == 0) {
    const float s = g / (1.0f + expf(-g)) * u;  // as swiglu.cu computes it
    gate[r] = into_gate ? s : g;
    up[r] = into_gate ? u : s;
  }
}

}  // namespace

cudaError_t launch_gemv(const LaunchConfig& at, const float* x, int64_t cols, DType dtype,
                        const GemvSegments& segments, int count) {
  GemvGrid grid;
  grid.count = count;
  for (int s = 0; s < count; ++s) {
    grid.segments[s] = segments[static_cast<size_t>(s)];
    grid.first_block[s + 1] = grid.first_block[s] + (segments[s].rows + kWarps - 1) / kWarps;
  }
  const int64_t blocks = grid.first_block[count];
  if (blocks == 0) return cudaSuccess;
  const bool aligned = reinterpret_cast<uintptr_t>(x) % 16 == 0;
  return dispatch_format(dtype, [&]<DType T>() {
    auto kernel = aligned ? gemv_kernel<T, true> : gemv_kernel<T, false>;
    return launch(kernel, dim3(static_cast<unsigned int>(blocks)), dim3(kWarps * 32), 0, at, x,
                  cols, grid);
  });
}

cudaError_t launch_gemv_swiglu(const LaunchConfig& at, const float* x, int64_t cols, DType dtype,
                               const void* w_gate, const void* w_up, int64_t rows, float* gate,
                               float* up, bool into_gate) {
  const int64_t blocks = (rows + kWarps - 1) / kWarps;
  if (blocks == 0) return cudaSuccess;
  const bool aligned = reinterpret_cast<uintptr_t>(x) % 16 == 0;
  return dispatch_format(dtype, [&]<DType T>() {
    auto kernel = aligned ? gemv_swiglu_kernel<T, true> : gemv_swiglu_kernel<T, false>;
    return launch(kernel, dim3(static_cast<unsigned int>(blocks)), dim3(kWarps * 32), 0, at, x,
                  cols, w_gate, w_up, rows, gate, up, into_gate);
  });
}

}  // namespace duet::cuda
