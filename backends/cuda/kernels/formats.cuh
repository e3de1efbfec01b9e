// formats.cuh — the stored weight formats of duet/block_formats.h,
// decoded on the device: one element at a time (embedding, dequantize) and a
// whole 32-element block against 32 activations (gemv).
//
// Rows of a quantized matrix are arrays of blocks (duet::blocks::BlockQ4_0,
// BlockQ4_1, BlockQ8_0); inside a 4-bit block element j (0..15) is the low
// nibble of qs[j] and element j + 16 the high nibble. Device buffers start 256-byte aligned and
// every row is a whole number of blocks, so a q4_1 block is 4-byte aligned and the others 2-byte
// aligned; loads below rely on exactly that much.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>

#include "duet/block_formats.h"
#include "duet/dtype.h"

namespace duet::cuda {

__device__ __forceinline__ float f16_bits(uint16_t h) { return __half2float(__ushort_as_half(h)); }
__device__ __forceinline__ float bf16_bits(uint16_t h) {
  return __uint_as_float(uint32_t{h} << 16);
}
__device__ __forceinline__ uint16_t load_u16(const uint8_t* p) {
  return *reinterpret_cast<const uint16_t*>(p);
}
__device__ __forceinline__ uint32_t load_u32(const uint8_t* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}

template <DType T>
struct Format;

template <>
struct Format<DType::kF32> {
  static constexpr bool kBlocked = false;
  __device__ static float element(const uint8_t* row, int64_t e) {
    return reinterpret_cast<const float*>(row)[e];
  }
};

template <>
struct Format<DType::kF16> {
  static constexpr bool kBlocked = false;
  __device__ static float element(const uint8_t* row, int64_t e) {
    return f16_bits(load_u16(row + 2 * e));
  }
};

template <>
struct Format<DType::kBF16> {
  static constexpr bool kBlocked = false;
  __device__ static float element(const uint8_t* row, int64_t e) {
    return bf16_bits(load_u16(row + 2 * e));
  }
};

template <>
struct Format<DType::kQ4_0> {
  static constexpr bool kBlocked = true;
  static constexpr int kBytes = duet::blocks::kBlockBytes<DType::kQ4_0>;
  static constexpr int kQs = offsetof(duet::blocks::BlockQ4_0, qs);
  __device__ static float element(const uint8_t* row, int64_t e) {
    const uint8_t* b = row + (e / 32) * kBytes;
    const int j = static_cast<int>(e % 32);
    const int q = j < 16 ? (b[kQs + j] & 15) : (b[kQs + j - 16] >> 4);
    return f16_bits(load_u16(b)) * static_cast<float>(q - 8);
  }
  // Σ_j element(j) * x[j] over the block at b.
  __device__ static float dot(const uint8_t* b, const float (&x)[32]) {
    float acc = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const uint32_t two = load_u16(b + kQs + 2 * i);
#pragma unroll
      for (int byte = 0; byte < 2; ++byte) {
        const int j = 2 * i + byte;
        const uint32_t q = (two >> (8 * byte)) & 0xffu;
        acc += static_cast<float>(static_cast<int>(q & 15u) - 8) * x[j] +
               static_cast<float>(static_cast<int>(q >> 4) - 8) * x[j + 16];
      }
    }
    return f16_bits(load_u16(b)) * acc;
  }
};

template <>
struct Format<DType::kQ4_1> {
  static constexpr bool kBlocked = true;
  static constexpr int kBytes = duet::blocks::kBlockBytes<DType::kQ4_1>;
  static constexpr int kQs = offsetof(duet::blocks::BlockQ4_1, qs);
  static constexpr int kM = offsetof(duet::blocks::BlockQ4_1, m);
  __device__ static float element(const uint8_t* row, int64_t e) {
    const uint8_t* b = row + (e / 32) * kBytes;
    const int j = static_cast<int>(e % 32);
    const int q = j < 16 ? (b[kQs + j] & 15) : (b[kQs + j - 16] >> 4);
    return f16_bits(load_u16(b)) * static_cast<float>(q) + f16_bits(load_u16(b + kM));
  }
  __device__ static float dot(const uint8_t* b, const float (&x)[32]) {
    const uint32_t dm = load_u32(b);
    float acc = 0.0f;  // Σ q_j x_j
    float sum = 0.0f;  // Σ x_j, which the offset m multiplies
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint32_t four = load_u32(b + kQs + 4 * i);
#pragma unroll
      for (int byte = 0; byte < 4; ++byte) {
        const int j = 4 * i + byte;
        const uint32_t q = (four >> (8 * byte)) & 0xffu;
        acc += static_cast<float>(q & 15u) * x[j] + static_cast<float>(q >> 4) * x[j + 16];
        sum += x[j] + x[j + 16];
      }
    }
    return f16_bits(static_cast<uint16_t>(dm & 0xffffu)) * acc +
           f16_bits(static_cast<uint16_t>(dm >> 16)) * sum;
  }
};

template <>
struct Format<DType::kQ8_0> {
  static constexpr bool kBlocked = true;
  static constexpr int kBytes = duet::blocks::kBlockBytes<DType::kQ8_0>;
  static constexpr int kQs = offsetof(duet::blocks::BlockQ8_0, qs);
  __device__ static float element(const uint8_t* row, int64_t e) {
    const uint8_t* b = row + (e / 32) * kBytes;
    const int j = static_cast<int>(e % 32);
    return f16_bits(load_u16(b)) * static_cast<float>(static_cast<int8_t>(b[kQs + j]));
  }
  __device__ static float dot(const uint8_t* b, const float (&x)[32]) {
    float acc = 0.0f;
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const uint32_t two = load_u16(b + kQs + 2 * i);
      acc += static_cast<float>(static_cast<int8_t>(two & 0xffu)) * x[2 * i] +
             static_cast<float>(static_cast<int8_t>(two >> 8)) * x[2 * i + 1];
    }
    return f16_bits(load_u16(b)) * acc;
  }
};

// Bytes of one row of `cols` elements (cols a multiple of 32 for blocks).
template <DType T>
__host__ __device__ constexpr int64_t row_bytes(int64_t cols) {
  if constexpr (T == DType::kF32) {
    return 4 * cols;
  } else if constexpr (T == DType::kF16 || T == DType::kBF16) {
    return 2 * cols;
  } else {
    return cols / 32 * Format<T>::kBytes;
  }
}

// Calls f.template operator()<T>() for the runtime dtype; returns
// cudaErrorInvalidValue for a dtype no kernel decodes.
template <typename F>
cudaError_t dispatch_format(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kF32:
      return f.template operator()<DType::kF32>();
    case DType::kF16:
      return f.template operator()<DType::kF16>();
    case DType::kBF16:
      return f.template operator()<DType::kBF16>();
    case DType::kQ4_0:
      return f.template operator()<DType::kQ4_0>();
    case DType::kQ4_1:
      return f.template operator()<DType::kQ4_1>();
    case DType::kQ8_0:
      return f.template operator()<DType::kQ8_0>();
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace duet::cuda
