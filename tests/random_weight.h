// random_weight.h — random weight matrices in any stored format, for the
// op tests.
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "duet/block_formats.h"
#include "duet/dtype.h"
#include "duet/quant.h"
#include "random_floats.h"

namespace duet::testing {

// `rows` x `cols` values uniform in [-1, 1) (random_floats, `seed`),
// stored as `type` row by row with quantize_row.
inline std::vector<uint8_t> random_weight(DType type, int64_t rows, int64_t cols, uint32_t seed) {
  const std::vector<float> x = testdata::random_floats(static_cast<size_t>(rows * cols), seed);
  const uint64_t row_bytes = *dtype_row_bytes(type, static_cast<uint64_t>(cols));
  std::vector<uint8_t> bytes(row_bytes * static_cast<uint64_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    quantize_row(type, x.data() + r * cols, bytes.data() + row_bytes * static_cast<uint64_t>(r),
                 cols);
  }
  return bytes;
}

// `rows` x `cols` of a K-quant type (which quantize_row does not write):
// random blocks whose f16 super-block scales (d, and dmin where the type has
// one) are random in [0.0005, 0.002], so elements stay within about ±1.
inline std::vector<uint8_t> random_k_quant_weight(DType type, int64_t rows, int64_t cols,
                                                  uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> scale(0.0005f, 0.002f);
  std::vector<uint8_t> bytes(*dtype_row_bytes(type, static_cast<uint64_t>(cols)) *
                             static_cast<uint64_t>(rows));
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  blocks::visit_block_type(type, [&](auto traits) {
    using Block = typename decltype(traits)::Block;
    for (size_t at = 0; at + sizeof(Block) <= bytes.size(); at += sizeof(Block)) {
      Block b;
      std::memcpy(&b, bytes.data() + at, sizeof b);
      b.d = f32_to_f16(scale(rng));
      if constexpr (requires { b.dmin; }) b.dmin = f32_to_f16(scale(rng));
      std::memcpy(bytes.data() + at, &b, sizeof b);
    }
  });
  return bytes;
}

}  // namespace duet::testing
