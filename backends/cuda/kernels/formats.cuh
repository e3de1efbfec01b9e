// formats.cuh — the stored weight formats of duet/block_formats.h,
// decoded on the device: one element at a time (embedding, dequantize) and a
// 32-element block against 32 activations (gemv).
//
// Rows of a quantized matrix are arrays of blocks of kElements elements
// (duet::blocks::BlockQ4_0 ... BlockQ6_K: 32, or the K-quants' super-blocks
// of 256). Each format's dot(row, b, x) multiplies the row's 32-element
// block b (for a K-quant, a part of super-block b / 8) with 32 activations.
// For q4_0, q4_1 and q8_0 element j (0..15) of a 4-bit block is the low
// nibble of qs[j] and element j + 16 the high nibble, read here with wide
// loads; the other formats decode through duet/block_formats.h's functions,
// which host and device share. Device buffers start 256-byte aligned and
// every row is a whole number of blocks (all of even size), so a q4_1 block
// is 4-byte aligned and the others 2-byte aligned; loads below rely on
// exactly that much.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "duet/block_formats.h"
#include "duet/dtype.h"

namespace duet::cuda {

// Host and device: tests/cuda_formats_test.cu runs this decoding on the host
// against core's dequantization.
#define DUET_FORMAT_FN __host__ __device__ __forceinline__
// Unrolled on the device; the host pass knows no such pragma.
#ifdef __CUDA_ARCH__
#define DUET_FORMAT_UNROLL _Pragma("unroll")
#else
#define DUET_FORMAT_UNROLL
#endif

DUET_FORMAT_FN float f16_bits(uint16_t h) { return __half2float(__ushort_as_half(h)); }
DUET_FORMAT_FN float bf16_bits(uint16_t h) {
  const uint32_t bits = uint32_t{h} << 16;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}
DUET_FORMAT_FN uint16_t load_u16(const uint8_t* p) { return *reinterpret_cast<const uint16_t*>(p); }
DUET_FORMAT_FN uint32_t load_u32(const uint8_t* p) { return *reinterpret_cast<const uint32_t*>(p); }

template <DType T>
struct Format;

namespace blk = duet::blocks;

template <>
struct Format<DType::kF32> {
  static constexpr bool kBlocked = false;
  DUET_FORMAT_FN static float element(const uint8_t* row, int64_t e) {
    return reinterpret_cast<const float*>(row)[e];
  }
};

template <>
struct Format<DType::kF16> {
  static constexpr bool kBlocked = false;
  DUET_FORMAT_FN static float element(const uint8_t* row, int64_t e) {
    return f16_bits(load_u16(row + 2 * e));
  }
};

template <>
struct Format<DType::kBF16> {
  static constexpr bool kBlocked = false;
  DUET_FORMAT_FN static float element(const uint8_t* row, int64_t e) {
    return bf16_bits(load_u16(row + 2 * e));
  }
};

template <>
struct Format<DType::kQ4_0> {
  static constexpr bool kBlocked = true;
  static constexpr int kElements = 32;
  static constexpr int kBytes = duet::blocks::kBlockBytes<DType::kQ4_0>;
  static constexpr int kQs = offsetof(duet::blocks::BlockQ4_0, qs);
  DUET_FORMAT_FN static float element(const uint8_t* row, int64_t e) {
    const uint8_t* b = row + (e / 32) * kBytes;
    const int j = static_cast<int>(e % 32);
    const int q = j < 16 ? (b[kQs + j] & 15) : (b[kQs + j - 16] >> 4);
    return f16_bits(load_u16(b)) * static_cast<float>(q - 8);
  }
  // Σ_j element(32 * block + j) * x[j].
  DUET_FORMAT_FN static float dot(const uint8_t* row, int64_t block, const float (&x)[32]) {
    const uint8_t* b = row + block * kBytes;
    float acc = 0.0f;
    DUET_FORMAT_UNROLL
    for (int i = 0; i < 8; ++i) {
      const uint32_t two = load_u16(b + kQs + 2 * i);
      DUET_FORMAT_UNROLL
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
  static constexpr int kElements = 32;
  static constexpr int kBytes = duet::blocks::kBlockBytes<DType::kQ4_1>;
  static constexpr int kQs = offsetof(duet::blocks::BlockQ4_1, qs);
  static constexpr int kM = offsetof(duet::blocks::BlockQ4_1, m);
  DUET_FORMAT_FN static float element(const uint8_t* row, int64_t e) {
    const uint8_t* b = row + (e / 32) * kBytes;
    const int j = static_cast<int>(e % 32);
    const int q = j < 16 ? (b[kQs + j] & 15) : (b[kQs + j - 16] >> 4);
    return f16_bits(load_u16(b)) * static_cast<float>(q) + f16_bits(load_u16(b + kM));
  }
  DUET_FORMAT_FN static float dot(const uint8_t* row, int64_t block, const float (&x)[32]) {
    const uint8_t* b = row + block * kBytes;
    const uint32_t dm = load_u32(b);
    float acc = 0.0f;  // Σ q_j x_j
    float sum = 0.0f;  // Σ x_j, which the offset m multiplies
    DUET_FORMAT_UNROLL
    for (int i = 0; i < 4; ++i) {
      const uint32_t four = load_u32(b + kQs + 4 * i);
      DUET_FORMAT_UNROLL
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
  static constexpr int kElements = 32;
  static constexpr int kBytes = duet::blocks::kBlockBytes<DType::kQ8_0>;
  static constexpr int kQs = offsetof(duet::blocks::BlockQ8_0, qs);
  DUET_FORMAT_FN static float element(const uint8_t* row, int64_t e) {
    const uint8_t* b = row + (e / 32) * kBytes;
    const int j = static_cast<int>(e % 32);
    return f16_bits(load_u16(b)) * static_cast<float>(static_cast<int8_t>(b[kQs + j]));
  }
  DUET_FORMAT_FN static float dot(const uint8_t* row, int64_t block, const float (&x)[32]) {
    const uint8_t* b = row + block * kBytes;
    float acc = 0.0f;
    DUET_FORMAT_UNROLL
    for (int i = 0; i < 16; ++i) {
      const uint32_t two = load_u16(b + kQs + 2 * i);
      acc += static_cast<float>(static_cast<int8_t>(two & 0xffu)) * x[2 * i] +
             static_cast<float>(static_cast<int8_t>(two >> 8)) * x[2 * i + 1];
    }
    return f16_bits(load_u16(b)) * acc;
  }
};

// The formats below decode each element with block_formats.h's functions and
// compute as core's dequantization does (x = d * q (+ m) per block or
// sub-block, the scale products formed first), though the device may fuse a
// multiply and an add.

// Block `i` of a row of Block.
template <typename Block>
DUET_FORMAT_FN const Block& block_at(const uint8_t* row, int64_t i) {
  return reinterpret_cast<const Block*>(row)[i];
}

template <>
struct Format<DType::kQ5_0> {
  static constexpr bool kBlocked = true;
  static constexpr int kElements = 32;
  static constexpr int kBytes = blk::kBlockBytes<DType::kQ5_0>;
  DUET_FORMAT_FN static float element(const uint8_t* row, int64_t e) {
    const auto& b = block_at<blk::BlockQ5_0>(row, e / 32);
    return f16_bits(b.d) * static_cast<float>(blk::q5_0_quant(b, static_cast<int>(e % 32)));
  }
  DUET_FORMAT_FN static float dot(const uint8_t* row, int64_t block, const float (&x)[32]) {
    const auto& b = block_at<blk::BlockQ5_0>(row, block);
    float acc = 0.0f;
    DUET_FORMAT_UNROLL
    for (int j = 0; j < 32; ++j) acc += static_cast<float>(blk::q5_0_quant(b, j)) * x[j];
    return f16_bits(b.d) * acc;
  }
};

template <>
struct Format<DType::kIQ4_NL> {
  static constexpr bool kBlocked = true;
  static constexpr int kElements = 32;
  static constexpr int kBytes = blk::kBlockBytes<DType::kIQ4_NL>;
  DUET_FORMAT_FN static float element(const uint8_t* row, int64_t e) {
    const auto& b = block_at<blk::BlockIQ4_NL>(row, e / 32);
    return f16_bits(b.d) * static_cast<float>(blk::iq4_nl_quant(b, static_cast<int>(e % 32)));
  }
  DUET_FORMAT_FN static float dot(const uint8_t* row, int64_t block, const float (&x)[32]) {
    const auto& b = block_at<blk::BlockIQ4_NL>(row, block);
    float acc = 0.0f;
    DUET_FORMAT_UNROLL
    for (int j = 0; j < 32; ++j) acc += static_cast<float>(blk::iq4_nl_quant(b, j)) * x[j];
    return f16_bits(b.d) * acc;
  }
};

template <>
struct Format<DType::kQ5_1> {
  static constexpr bool kBlocked = true;
  static constexpr int kElements = 32;
  static constexpr int kBytes = blk::kBlockBytes<DType::kQ5_1>;
  DUET_FORMAT_FN static float element(const uint8_t* row, int64_t e) {
    const auto& b = block_at<blk::BlockQ5_1>(row, e / 32);
    return f16_bits(b.d) * static_cast<float>(blk::q5_1_quant(b, static_cast<int>(e % 32))) +
           f16_bits(b.m);
  }
  DUET_FORMAT_FN static float dot(const uint8_t* row, int64_t block, const float (&x)[32]) {
    const auto& b = block_at<blk::BlockQ5_1>(row, block);
    float acc = 0.0f;  // Σ q_j x_j
    float sum = 0.0f;  // Σ x_j, which the offset m multiplies
    DUET_FORMAT_UNROLL
    for (int j = 0; j < 32; ++j) {
      acc += static_cast<float>(blk::q5_1_quant(b, j)) * x[j];
      sum += x[j];
    }
    return f16_bits(b.d) * acc + f16_bits(b.m) * sum;
  }
};

// The K-quants: element j of super-block j / 256; the 32-element block b of
// a row is elements 32 (b % 8) .. + 31 of super-block b / 8.
template <typename Block>
struct KQuant {
  static constexpr bool kBlocked = true;
  static constexpr int kElements = blk::kQK_K;
  static constexpr int kBytes = static_cast<int>(sizeof(Block));
  static constexpr int kParts = blk::kQK_K / 32;  // 32-element blocks per super-block
};

// q4_k and q5_k: one 6-bit scale and min per 32 elements; K gives the
// block type and its quant j.
struct Q4K {
  using Block = blk::BlockQ4_K;
  DUET_FORMAT_FN static int quant(const Block& b, int j) { return blk::q4_k_quant(b, j); }
};
struct Q5K {
  using Block = blk::BlockQ5_K;
  DUET_FORMAT_FN static int quant(const Block& b, int j) { return blk::q5_k_quant(b, j); }
};

template <typename K>
struct K4Quant : KQuant<typename K::Block> {
  using Block = typename K::Block;
  DUET_FORMAT_FN static float element(const uint8_t* row, int64_t e) {
    const auto& b = block_at<Block>(row, e / blk::kQK_K);
    const int j = static_cast<int>(e % blk::kQK_K);
    int sc = 0, m = 0;
    blk::k4_scale_min(b.scales, j / 32, sc, m);
    return f16_bits(b.d) * static_cast<float>(sc) * static_cast<float>(K::quant(b, j)) -
           f16_bits(b.dmin) * static_cast<float>(m);
  }
  DUET_FORMAT_FN static float dot(const uint8_t* row, int64_t block, const float (&x)[32]) {
    const auto& b = block_at<Block>(row, block / KQuant<Block>::kParts);
    const int s = static_cast<int>(block % KQuant<Block>::kParts);
    int sc = 0, m = 0;
    blk::k4_scale_min(b.scales, s, sc, m);
    float acc = 0.0f;
    float sum = 0.0f;
    DUET_FORMAT_UNROLL
    for (int j = 0; j < 32; ++j) {
      acc += static_cast<float>(K::quant(b, 32 * s + j)) * x[j];
      sum += x[j];
    }
    return f16_bits(b.d) * static_cast<float>(sc) * acc -
           f16_bits(b.dmin) * static_cast<float>(m) * sum;
  }
};

template <>
struct Format<DType::kQ4_K> : K4Quant<Q4K> {};
template <>
struct Format<DType::kQ5_K> : K4Quant<Q5K> {};

// q2_k, q3_k and q6_k: a scale (q2_k: and a min) per 16 elements. Each
// gives, for sub-block s (0..15) of super-block b, its scale dl and offset
// ml (x = dl * q - ml) and its quant j.
struct Q2K {
  using Block = blk::BlockQ2_K;
  DUET_FORMAT_FN static float scale(const Block& b, int s) {
    return f16_bits(b.d) * static_cast<float>(blk::q2_k_scale(b, s));
  }
  DUET_FORMAT_FN static float offset(const Block& b, int s) {
    return f16_bits(b.dmin) * static_cast<float>(blk::q2_k_min(b, s));
  }
  DUET_FORMAT_FN static int quant(const Block& b, int j) { return blk::q2_k_quant(b, j); }
};
struct Q3K {
  using Block = blk::BlockQ3_K;
  DUET_FORMAT_FN static float scale(const Block& b, int s) {
    return f16_bits(b.d) * static_cast<float>(blk::q3_k_scale(b, s) - 32);
  }
  DUET_FORMAT_FN static float offset(const Block&, int) { return 0.0f; }
  DUET_FORMAT_FN static int quant(const Block& b, int j) { return blk::q3_k_quant(b, j); }
};
struct Q6K {
  using Block = blk::BlockQ6_K;
  DUET_FORMAT_FN static float scale(const Block& b, int s) {
    return f16_bits(b.d) * static_cast<float>(b.scales[s]);
  }
  DUET_FORMAT_FN static float offset(const Block&, int) { return 0.0f; }
  DUET_FORMAT_FN static int quant(const Block& b, int j) { return blk::q6_k_quant(b, j); }
};

template <typename K>
struct K16Quant : KQuant<typename K::Block> {
  using Block = typename K::Block;
  DUET_FORMAT_FN static float element(const uint8_t* row, int64_t e) {
    const auto& b = block_at<Block>(row, e / blk::kQK_K);
    const int j = static_cast<int>(e % blk::kQK_K);
    return K::scale(b, j / 16) * static_cast<float>(K::quant(b, j)) - K::offset(b, j / 16);
  }
  DUET_FORMAT_FN static float dot(const uint8_t* row, int64_t block, const float (&x)[32]) {
    const auto& b = block_at<Block>(row, block / KQuant<Block>::kParts);
    const int first = 32 * static_cast<int>(block % KQuant<Block>::kParts);
    float result = 0.0f;
    DUET_FORMAT_UNROLL
    for (int h = 0; h < 2; ++h) {
      float acc = 0.0f;
      float sum = 0.0f;
      DUET_FORMAT_UNROLL
      for (int j = 0; j < 16; ++j) {
        acc += static_cast<float>(K::quant(b, first + 16 * h + j)) * x[16 * h + j];
        sum += x[16 * h + j];
      }
      const int s = (first + 16 * h) / 16;
      result += K::scale(b, s) * acc - K::offset(b, s) * sum;
    }
    return result;
  }
};

template <>
struct Format<DType::kQ2_K> : K16Quant<Q2K> {};
template <>
struct Format<DType::kQ3_K> : K16Quant<Q3K> {};
template <>
struct Format<DType::kQ6_K> : K16Quant<Q6K> {};

// Bytes of one row of `cols` elements (cols a multiple of kElements for blocks).
template <DType T>
__host__ __device__ constexpr int64_t row_bytes(int64_t cols) {
  if constexpr (T == DType::kF32) {
    return 4 * cols;
  } else if constexpr (T == DType::kF16 || T == DType::kBF16) {
    return 2 * cols;
  } else {
    return cols / Format<T>::kElements * Format<T>::kBytes;
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
    case DType::kQ5_0:
      return f.template operator()<DType::kQ5_0>();
    case DType::kQ5_1:
      return f.template operator()<DType::kQ5_1>();
    case DType::kIQ4_NL:
      return f.template operator()<DType::kIQ4_NL>();
    case DType::kQ2_K:
      return f.template operator()<DType::kQ2_K>();
    case DType::kQ3_K:
      return f.template operator()<DType::kQ3_K>();
    case DType::kQ4_K:
      return f.template operator()<DType::kQ4_K>();
    case DType::kQ5_K:
      return f.template operator()<DType::kQ5_K>();
    case DType::kQ6_K:
      return f.template operator()<DType::kQ6_K>();
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace duet::cuda
