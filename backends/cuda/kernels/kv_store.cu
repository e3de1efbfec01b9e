// kv_store.cu — writes a step's new K and V rows into their cache slots,
// as f32 or rounded to f16.
#include <cuda_fp16.h>

#include "common.cuh"

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

}  // namespace

cudaError_t launch_kv_store(const LaunchConfig& at, const KvStoreArgs& args) {
  if (args.n_tokens == 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned int>(args.n_tokens));
  if (args.cache == CacheType::kF16)
    return launch(kv_store_kernel<__half>, grid, dim3(kThreads), 0, at, args);
  return launch(kv_store_kernel<float>, grid, dim3(kThreads), 0, at, args);
}

}  // namespace duet::cuda
