// random_weight.h — random weight matrices in any stored format, for the
// op tests.
#pragma once

#include <cstdint>
#include <vector>

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

}  // namespace duet::testing
