// cache_row.cuh — reading one head's row of the KV cache as f32, for each
// element type the cache stores (CacheType): f32, f16 and q8_0 (duet/quant.h's
// blocks of 32: an f16 scale, then 32 int8), shared by the attention kernels.
#pragma once

#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>

#include "duet/block_formats.h"

namespace duet::cuda {

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }

// Four consecutive elements as f32; `p` is 16-byte (f32) or 8-byte (f16)
// aligned.
__device__ __forceinline__ float4 load4(const float* p) {
  return *reinterpret_cast<const float4*>(p);
}
__device__ __forceinline__ float4 load4(const __half* p) {
  const __half2* h = reinterpret_cast<const __half2*>(p);
  const float2 lo = __half22float2(h[0]);
  const float2 hi = __half22float2(h[1]);
  return make_float4(lo.x, lo.y, hi.x, hi.y);
}

// A cache of q8_0 rows (duet/quant.h's blocks of 32: an f16 scale, then 32
// int8), as the template argument that picks its reader.
struct Q8_0Cache {};
constexpr int kQ8Block = duet::blocks::kQK;
constexpr int kQ8BlockBytes = duet::blocks::kBlockBytes<DType::kQ8_0>;
constexpr int kQ8Quants = offsetof(duet::blocks::BlockQ8_0, qs);

// How one head's row of the cache is found and read, per element type:
// head() points at the row of position `slot` for KV head `kv_head`, get()
// reads element d of it, get4() elements d..d+3 (d a multiple of 4).
template <typename T>
struct CacheRow {
  using Ptr = const T*;
  __device__ static Ptr head(const void* cache, int64_t slot, int64_t slot_elements,
                             int64_t head_offset) {
    return static_cast<const T*>(cache) + slot * slot_elements + head_offset;
  }
  __device__ static float get(Ptr p, int d) { return to_float(p[d]); }
  __device__ static float4 get4(Ptr p, int d) { return load4(p + d); }
};

template <>
struct CacheRow<Q8_0Cache> {
  using Ptr = const uint8_t*;  // the head's first block (head_dim is a multiple of 32)
  __device__ static Ptr head(const void* cache, int64_t slot, int64_t slot_elements,
                             int64_t head_offset) {
    return static_cast<const uint8_t*>(cache) + slot * (slot_elements / kQ8Block) * kQ8BlockBytes +
           head_offset / kQ8Block * kQ8BlockBytes;
  }
  __device__ static float scale(const uint8_t* block) {
    return __half2float(*reinterpret_cast<const __half*>(block));
  }
  __device__ static float get(Ptr p, int d) {
    const uint8_t* block = p + d / kQ8Block * kQ8BlockBytes;
    return scale(block) * static_cast<float>(static_cast<int8_t>(block[kQ8Quants + d % kQ8Block]));
  }
  // Four elements never straddle a block. The quants are 2-byte aligned only.
  __device__ static float4 get4(Ptr p, int d) {
    const uint8_t* block = p + d / kQ8Block * kQ8BlockBytes;
    const uint8_t* q = block + kQ8Quants + d % kQ8Block;
    const float s = scale(block);
    return make_float4(s * static_cast<int8_t>(q[0]), s * static_cast<int8_t>(q[1]),
                       s * static_cast<int8_t>(q[2]), s * static_cast<int8_t>(q[3]));
  }
};

}  // namespace duet::cuda
