// kv_store.cu — writes a step's new K and V rows into their cache slots,
// as f32, rounded to f16, or quantized to q8_0 blocks.
#include <cuda_fp16.h>

#include "common.cuh"
#include "duet/block_formats.h"

namespace duet::cuda {
namespace {

constexpr int kThreads = 256;

// One block per row; threads stride over the row's n_kv_heads * head_dim
// elements. The slot comes from device memory (see AttentionArgs).
template <typename T>
__device__ __forceinline__ T to_cache(float x);
template <>
__device__ __forceinline__ float to_cache<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __half to_cache<__half>(float x) {
  return __float2half_rn(x);  // nearest, ties to even; subnormals and overflow to inf as IEEE
}

template <typename T>
__global__ void kv_store_kernel(KvStoreArgs a) {
  wait_for_previous_kernel();
  const int64_t i = blockIdx.x;
  const int64_t n = a.row_elements;
  const int64_t slot = a.row_slot[i];
  T* k_cache = static_cast<T*>(a.k_cache);
  T* v_cache = static_cast<T*>(a.v_cache);
  for (int64_t e = threadIdx.x; e < n; e += kThreads) {
    k_cache[slot * n + e] = to_cache<T>(a.k[i * n + e]);
    v_cache[slot * n + e] = to_cache<T>(a.v[i * n + e]);
  }
}

constexpr int kQ8Block = duet::blocks::kQK;
constexpr int kQ8BlockBytes = duet::blocks::kBlockBytes<DType::kQ8_0>;

// One q8_0 block of `x` (32 elements, a lane each) into `block`, computed
// as duet/quant.h's quantize_q8_0 computes it: d = amax / 127 in f32, stored
// as f16; each quant lround(x * (1 / d)). Without fast math nvcc's division
// and reciprocal are IEEE-exact, and the product is not fused with
// anything, so the bytes are the host's.
__device__ __forceinline__ void quantize_q8_block(const float* x, uint8_t* block, int lane) {
  const float v = x[lane];
  float amax = fabsf(v);
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2)
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, offset));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  if (lane == 0) *reinterpret_cast<__half*>(block) = __float2half_rn(d);
  block[2 + lane] = static_cast<uint8_t>(static_cast<int8_t>(lroundf(v * id)));
}

// One block per row; each warp quantizes blocks w, w + 8, ... of K and V.
__global__ void kv_store_q8_kernel(KvStoreArgs a) {
  wait_for_previous_kernel();
  const int64_t i = blockIdx.x;
  const int64_t n = a.row_elements;
  const int64_t blocks = n / kQ8Block;
  const int64_t slot = a.row_slot[i];
  const int lane = static_cast<int>(threadIdx.x) % 32;
  auto* k_cache = static_cast<uint8_t*>(a.k_cache) + slot * blocks * kQ8BlockBytes;
  auto* v_cache = static_cast<uint8_t*>(a.v_cache) + slot * blocks * kQ8BlockBytes;
  for (int64_t b = threadIdx.x / 32; b < blocks; b += kThreads / 32) {
    quantize_q8_block(a.k + i * n + b * kQ8Block, k_cache + b * kQ8BlockBytes, lane);
    quantize_q8_block(a.v + i * n + b * kQ8Block, v_cache + b * kQ8BlockBytes, lane);
  }
}

}  // namespace

cudaError_t launch_kv_store(const LaunchConfig& at, const KvStoreArgs& args) {
  if (args.n_tokens == 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned int>(args.n_tokens));
  if (args.cache == CacheType::kQ8_0) {
    if (args.row_elements % kQ8Block != 0) return cudaErrorInvalidValue;
    return launch(kv_store_q8_kernel, grid, dim3(kThreads), 0, at, args);
  }
  if (args.cache == CacheType::kF16)
    return launch(kv_store_kernel<__half>, grid, dim3(kThreads), 0, at, args);
  return launch(kv_store_kernel<float>, grid, dim3(kThreads), 0, at, args);
}

}  // namespace duet::cuda
