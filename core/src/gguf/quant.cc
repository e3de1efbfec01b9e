#include "duet/quant.h"

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <string>

#include "duet/error.h"

namespace duet {
namespace {

constexpr int64_t kBlock = 32;  // elements per block of every ggml 32-block format
constexpr int64_t kHalf = kBlock / 2;

struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kHalf];
};
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[kHalf];
};
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kBlock];
};
static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ8_0) == 34,
              "block structs must match ggml's byte layout");

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

void check_length(const char* fn, DType type, int64_t n, int64_t block) {
  if (n < 0 || n % block != 0) {
    fail(fn, type,
         std::to_string(n) + " elements is not a multiple of the block size " +
             std::to_string(block));
  }
}

bool is_block_type(DType type) {
  return type == DType::kQ4_0 || type == DType::kQ4_1 || type == DType::kQ8_0;
}

void quantize_q4_0(const float* x, void* dst, int64_t n) {
  for (int64_t b = 0; b < n / kBlock; ++b) {
    const float* xb = x + b * kBlock;
    float amax = 0.0f;
    float vmax = 0.0f;  // the element of largest magnitude, with its sign
    for (int64_t j = 0; j < kBlock; ++j) {
      if (amax < std::fabs(xb[j])) {
        amax = std::fabs(xb[j]);
        vmax = xb[j];
      }
    }
    // Dividing by -8 maps vmax to q = 0 exactly, so the full 16 levels are
    // used on vmax's side; the same sign convention as ggml keeps files equal.
    const float d = vmax / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ4_0 out;
    out.d = f32_to_f16(d);
    for (int64_t j = 0; j < kHalf; ++j) {
      const int lo = std::min(15, static_cast<int>(xb[j] * id + 8.5f));
      const int hi = std::min(15, static_cast<int>(xb[j + kHalf] * id + 8.5f));
      out.qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
    store_block(dst, b, out);
  }
}

void quantize_q4_1(const float* x, void* dst, int64_t n) {
  for (int64_t b = 0; b < n / kBlock; ++b) {
    const float* xb = x + b * kBlock;
    float lo = FLT_MAX;
    float hi = -FLT_MAX;
    for (int64_t j = 0; j < kBlock; ++j) {
      lo = std::min(lo, xb[j]);
      hi = std::max(hi, xb[j]);
    }
    const float d = (hi - lo) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ4_1 out;
    out.d = f32_to_f16(d);
    out.m = f32_to_f16(lo);
    for (int64_t j = 0; j < kHalf; ++j) {
      const int q0 = std::min(15, static_cast<int>((xb[j] - lo) * id + 0.5f));
      const int q1 = std::min(15, static_cast<int>((xb[j + kHalf] - lo) * id + 0.5f));
      out.qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
    store_block(dst, b, out);
  }
}

void quantize_q8_0(const float* x, void* dst, int64_t n) {
  for (int64_t b = 0; b < n / kBlock; ++b) {
    const float* xb = x + b * kBlock;
    float amax = 0.0f;
    for (int64_t j = 0; j < kBlock; ++j) amax = std::max(amax, std::fabs(xb[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ8_0 out;
    out.d = f32_to_f16(d);
    for (int64_t j = 0; j < kBlock; ++j) {
      out.qs[j] = static_cast<int8_t>(std::lround(xb[j] * id));
    }
    store_block(dst, b, out);
  }
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
  check_length("dequantize_row", type, n, is_block_type(type) ? kBlock : 1);
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
    case DType::kQ4_0:
      for (int64_t b = 0; b < n / kBlock; ++b) {
        const auto blk = load_block<BlockQ4_0>(src, b);
        const float d = f16_to_f32(blk.d);
        float* y = dst + b * kBlock;
        for (int64_t j = 0; j < kHalf; ++j) {
          y[j] = d * static_cast<float>((blk.qs[j] & 0x0f) - 8);
          y[j + kHalf] = d * static_cast<float>((blk.qs[j] >> 4) - 8);
        }
      }
      return;
    case DType::kQ4_1:
      for (int64_t b = 0; b < n / kBlock; ++b) {
        const auto blk = load_block<BlockQ4_1>(src, b);
        const float d = f16_to_f32(blk.d);
        const float m = f16_to_f32(blk.m);
        float* y = dst + b * kBlock;
        for (int64_t j = 0; j < kHalf; ++j) {
          y[j] = d * static_cast<float>(blk.qs[j] & 0x0f) + m;
          y[j + kHalf] = d * static_cast<float>(blk.qs[j] >> 4) + m;
        }
      }
      return;
    case DType::kQ8_0:
      for (int64_t b = 0; b < n / kBlock; ++b) {
        const auto blk = load_block<BlockQ8_0>(src, b);
        const float d = f16_to_f32(blk.d);
        float* y = dst + b * kBlock;
        for (int64_t j = 0; j < kBlock; ++j) y[j] = d * static_cast<float>(blk.qs[j]);
      }
      return;
    case DType::kI32:
      break;
  }
  fail("dequantize_row", type, "not a floating-point or quantized type");
}

void quantize_row(DType type, const float* src, void* dst, int64_t n) {
  check_length("quantize_row", type, n, is_block_type(type) ? kBlock : 1);
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
      quantize_q4_0(src, dst, n);
      return;
    case DType::kQ4_1:
      quantize_q4_1(src, dst, n);
      return;
    case DType::kQ8_0:
      quantize_q8_0(src, dst, n);
      return;
    case DType::kI32:
      break;
  }
  fail("quantize_row", type, "not a floating-point or quantized type");
}

}  // namespace duet
