#include "duet/quant.h"

#include <bit>
#include <cstring>
#include <string>

#include "duet/block_formats.h"
#include "duet/error.h"
#include "gguf/block_dequantize.h"
#include "gguf/block_quantize.h"

namespace duet {
namespace {

// Blocks are read and written through memcpy because a row inside a mapped
// file carries no alignment or type guarantee for these structs.
template <typename Block>
Block load_block(const void* row, int64_t index) {
  Block b;
  std::memcpy(&b, static_cast<const uint8_t*>(row) + index * static_cast<int64_t>(sizeof(Block)),
              sizeof(Block));
  return b;
}

template <typename Block>
void store_block(void* row, int64_t index, const Block& b) {
  std::memcpy(static_cast<uint8_t*>(row) + index * static_cast<int64_t>(sizeof(Block)), &b,
              sizeof(Block));
}

[[noreturn]] void fail(const char* fn, DType type, const std::string& why) {
  throw Error(ErrorKind::kInternal, std::string(fn) + ": " + why + " (type " +
                                        ggml_type_name(static_cast<uint32_t>(type)) + ")");
}

void check_length(const char* fn, DType type, int64_t n) {
  const int64_t block = dtype_traits(type).block_size;
  if (n < 0 || n % block != 0) {
    fail(fn, type,
         std::to_string(n) + " elements is not a multiple of the block size " +
             std::to_string(block));
  }
}

// Expands or stores whole blocks of `Block` through a stack copy.
template <typename Block>
void dequantize_blocks(const void* src, float* dst, int64_t n) {
  constexpr int kElements = blocks::BlockTraits<Block>::kElements;
  for (int64_t b = 0; b < n / kElements; ++b) {
    blocks::dequantize_block(load_block<Block>(src, b), dst + b * kElements);
  }
}

template <typename Block, Block (*quantize)(const float*)>
void quantize_blocks(const float* src, void* dst, int64_t n) {
  constexpr int kElements = blocks::BlockTraits<Block>::kElements;
  for (int64_t b = 0; b < n / kElements; ++b) store_block(dst, b, quantize(src + b * kElements));
}

}  // namespace

float f16_to_f32(uint16_t h) noexcept {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24, exact in f32.
    const float mag = static_cast<float>(mant) * 0x1p-24f;
    return sign != 0 ? -mag : mag;
  }
  if (exp == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  // Rebias the exponent from 15 to 127.
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
}

uint16_t f32_to_f16(float f) noexcept {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t exp = (x >> 23) & 0xffu;
  uint32_t mant = x & 0x7fffffu;
  if (exp == 0xff) {
    // Keep the top payload bits and force the quiet bit so a NaN never
    // collapses into infinity.
    return static_cast<uint16_t>(mant == 0 ? (sign | 0x7c00u) : (sign | 0x7e00u | (mant >> 13)));
  }
  const int e = static_cast<int>(exp) - 127 + 15;  // the f16 biased exponent
  if (e >= 0x1f) return static_cast<uint16_t>(sign | 0x7c00u);
  if (e <= 0) {
    // An f16 subnormal m * 2^-24. Below 2^-25 everything rounds to zero
    // (2^-25 itself is a tie that goes to the even 0).
    if (e < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;  // the implicit leading one
    const int shift = 14 - e;
    uint32_t m = mant >> shift;
    const uint32_t rest = mant & ((1u << shift) - 1u);
    const uint32_t halfway = 1u << (shift - 1);
    // Rounding up from the largest subnormal carries into the exponent
    // field and correctly yields the smallest normal.
    if (rest > halfway || (rest == halfway && (m & 1u) != 0)) ++m;
    return static_cast<uint16_t>(sign | m);
  }
  uint32_t h = sign | (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  const uint32_t rest = mant & 0x1fffu;
  // A carry out of the mantissa bumps the exponent, up to infinity: the
  // right result in both cases.
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u) != 0)) ++h;
  return static_cast<uint16_t>(h);
}

float bf16_to_f32(uint16_t h) noexcept {
  return std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
}

uint16_t f32_to_bf16(float f) noexcept {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) {
    // Truncating could drop every payload bit and turn the NaN into inf.
    return static_cast<uint16_t>((x >> 16) | 0x40u);
  }
  // Adding 0x7fff plus the lowest kept bit rounds to nearest, ties to even.
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

void dequantize_row(DType type, const void* src, float* dst, int64_t n) {
  check_length("dequantize_row", type, n);
  switch (type) {
    case DType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::kF16:
    case DType::kBF16: {
      const auto* s = static_cast<const uint8_t*>(src);
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, s + 2 * i, sizeof h);
        dst[i] = type == DType::kF16 ? f16_to_f32(h) : bf16_to_f32(h);
      }
      return;
    }
    default:
      break;
  }
  const bool blocked = blocks::visit_block_type(
      type, [&](auto traits) { dequantize_blocks<typename decltype(traits)::Block>(src, dst, n); });
  if (!blocked) fail("dequantize_row", type, "not a floating-point or quantized type");
}

void quantize_row(DType type, const float* src, void* dst, int64_t n) {
  check_length("quantize_row", type, n);
  switch (type) {
    case DType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::kF16:
    case DType::kBF16: {
      auto* d = static_cast<uint8_t*>(dst);
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = type == DType::kF16 ? f32_to_f16(src[i]) : f32_to_bf16(src[i]);
        std::memcpy(d + 2 * i, &h, sizeof h);
      }
      return;
    }
    case DType::kQ4_0:
      return quantize_blocks<blocks::BlockQ4_0, blocks::quantize_q4_0>(src, dst, n);
    case DType::kQ4_1:
      return quantize_blocks<blocks::BlockQ4_1, blocks::quantize_q4_1>(src, dst, n);
    case DType::kQ5_0:
      return quantize_blocks<blocks::BlockQ5_0, blocks::quantize_q5_0>(src, dst, n);
    case DType::kQ5_1:
      return quantize_blocks<blocks::BlockQ5_1, blocks::quantize_q5_1>(src, dst, n);
    case DType::kQ8_0:
      return quantize_blocks<blocks::BlockQ8_0, blocks::quantize_q8_0>(src, dst, n);
    case DType::kIQ4_NL:
      return quantize_blocks<blocks::BlockIQ4_NL, blocks::quantize_iq4_nl>(src, dst, n);
    case DType::kQ2_K:
      return quantize_blocks<blocks::BlockQ2_K, blocks::quantize_q2_k>(src, dst, n);
    case DType::kQ3_K:
      return quantize_blocks<blocks::BlockQ3_K, blocks::quantize_q3_k>(src, dst, n);
    case DType::kQ4_K:
      return quantize_blocks<blocks::BlockQ4_K, blocks::quantize_q4_k>(src, dst, n);
    case DType::kQ5_K:
      return quantize_blocks<blocks::BlockQ5_K, blocks::quantize_q5_k>(src, dst, n);
    case DType::kQ6_K:
      return quantize_blocks<blocks::BlockQ6_K, blocks::quantize_q6_k>(src, dst, n);
    default:
      break;
  }
  fail("quantize_row", type, "not a type Duet quantizes to");
}

}  // namespace duet
