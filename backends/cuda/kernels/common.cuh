// common.cuh — what every kernel file shares: the launch helper, the
// programmatic-dependent-launch prologue and warp/block reductions.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels.h"

namespace duet::cuda {

// First statement of every kernel. Under programmatic dependent launch a
// kernel may start before the previous kernel of the stream has finished;
// griddepcontrol.wait blocks until that kernel has completed and its writes
// are visible, so nothing below it can read stale data or race a write.
// launch_dependents then lets the next kernel be scheduled early, which is
// what hides the launch latency of a chain of small decode kernels. Without
// PDL, or below sm_90, both are no-ops.
__device__ __forceinline__ void wait_for_previous_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}

// Launches kernel<<<grid, block, smem, at.stream>>>(args...), with the
// programmatic-stream-serialization attribute when at.pdl.
template <typename... Params, typename... Args>
cudaError_t launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                   const LaunchConfig& at, Args... args) {
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = at.stream;
  cudaLaunchAttribute attribute[1] = {};
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attribute;
  config.numAttrs = at.pdl ? 1 : 0;
  return cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...);
}

// Blocks needed for `n` items at `per_block` items each, capped at what a
// grid-stride loop needs to fill the device many times over.
inline unsigned int grid_for(int64_t n, int64_t per_block) {
  const int64_t blocks = (n + per_block - 1) / per_block;
  const int64_t cap = int64_t{1} << 20;
  return static_cast<unsigned int>(blocks < 1 ? 1 : (blocks > cap ? cap : blocks));
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Sum of `v` over the whole block, returned to every thread. blockDim.x is
// a multiple of 32 and at most 1024. Contains __syncthreads().
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float partial[32];
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int warps = static_cast<int>(blockDim.x) / 32;
  v = warp_sum(v);
  __syncthreads();  // `partial` may still be read by a previous call
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  float total = lane < warps ? partial[lane] : 0.0f;
  return warp_sum(total);
}

}  // namespace duet::cuda
