// The cuda backend's weight decoding (backends/cuda/kernels/formats.cuh),
// compiled by nvcc and run on the host, so no GPU is needed: for every
// weight format the kernels read, on random blocks,
//   - Format<T>::element equals core's dequantize_row bit for bit (the host
//     compiler evaluates the same expressions in the same order; on the
//     device a multiply and an add may fuse, which this cannot see);
//   - Format<T>::dot of each 32-element block is the dot product of those
//     values with the activations, within float rounding;
//   - row_bytes<T> is the row size core computes.
// The kernels around these functions (gemv, embedding, dequantize) run only
// on a GPU: cuda_test and the conformance matrix check them there.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "duet/block_formats.h"
#include "duet/dtype.h"
#include "duet/quant.h"
#include "formats.cuh"

namespace duet::cuda {
namespace {

// Random bytes for `rows` rows of `cols` elements of `type`, each block's f16
// scale fields (d, and m or dmin) set to finite values: random bytes there
// could be infinities or NaNs, which no file holds.
std::vector<uint8_t> random_rows(DType type, int64_t rows, int64_t cols, uint32_t seed) {
  const uint64_t row_bytes = *dtype_row_bytes(type, static_cast<uint64_t>(cols));
  std::vector<uint8_t> bytes(row_bytes * static_cast<uint64_t>(rows));
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(byte(rng));
  std::uniform_real_distribution<float> scale(-0.05f, 0.05f);
  blocks::visit_block_type(type, [&](auto traits) {
    using Block = typename decltype(traits)::Block;
    auto* blocks = reinterpret_cast<Block*>(bytes.data());
    for (size_t i = 0; i < bytes.size() / sizeof(Block); ++i) {
      Block& b = blocks[i];
      if constexpr (requires { b.d; }) {
        if constexpr (sizeof(b.d) == 2) b.d = f32_to_f16(scale(rng));
      }
      if constexpr (requires { b.m; }) b.m = f32_to_f16(scale(rng));
      if constexpr (requires { b.dmin; }) b.dmin = f32_to_f16(scale(rng));
    }
  });
  if (type == DType::kF16 || type == DType::kBF16) {  // finite values in [-1, 1]
    auto* h = reinterpret_cast<uint16_t*>(bytes.data());
    for (size_t i = 0; i < bytes.size() / 2; ++i) {
      const float v = scale(rng) * 20.0f;
      if (type == DType::kF16) {
        h[i] = f32_to_f16(v);
      } else {
        uint32_t bits;
        std::memcpy(&bits, &v, sizeof bits);
        h[i] = static_cast<uint16_t>(bits >> 16);
      }
    }
  } else if (type == DType::kF32) {
    auto* f = reinterpret_cast<float*>(bytes.data());
    for (size_t i = 0; i < bytes.size() / 4; ++i) f[i] = scale(rng) * 20.0f;
  }
  return bytes;
}

class CudaFormats : public ::testing::TestWithParam<DType> {};

TEST_P(CudaFormats, DecodeAsCoreDequantizes) {
  const DType type = GetParam();
  constexpr int64_t kRows = 3, kCols = 512;
  const std::vector<uint8_t> w = random_rows(type, kRows, kCols, 7);
  const uint64_t row_bytes_core = *dtype_row_bytes(type, kCols);
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::vector<float> x(kCols);
  for (float& v : x) v = uni(rng);
  const cudaError_t status = dispatch_format(type, [&]<DType T>() {
    EXPECT_EQ(row_bytes<T>(kCols), static_cast<int64_t>(row_bytes_core));
    for (int64_t r = 0; r < kRows; ++r) {
      const uint8_t* row = w.data() + r * row_bytes_core;
      std::vector<float> want(kCols);
      dequantize_row(type, row, want.data(), kCols);
      for (int64_t e = 0; e < kCols; ++e) {
        const float got = Format<T>::element(row, e);
        EXPECT_EQ(std::memcmp(&got, &want[e], sizeof got), 0)
            << "row " << r << ", element " << e << ": " << got << " against " << want[e];
      }
      if constexpr (Format<T>::kBlocked) {
        for (int64_t b = 0; b < kCols / 32; ++b) {
          float xb[32];
          double exact = 0.0, magnitude = 0.0;
          for (int j = 0; j < 32; ++j) {
            xb[j] = x[32 * b + j];
            exact += static_cast<double>(want[32 * b + j]) * xb[j];
            magnitude += std::fabs(static_cast<double>(want[32 * b + j]) * xb[j]);
          }
          EXPECT_NEAR(Format<T>::dot(row, b, xb), exact, 1e-5 * magnitude + 1e-30)
              << "row " << r << ", block " << b;
        }
      }
    }
    return cudaSuccess;
  });
  EXPECT_EQ(status, cudaSuccess) << dtype_name(type) << " has no device format";
}

TEST(CudaFormatsDispatch, RefusesATypeWithoutAFormat) {
  const cudaError_t status =
      dispatch_format(DType::kI32, [&]<DType T>() -> cudaError_t { return cudaSuccess; });
  EXPECT_EQ(status, cudaErrorInvalidValue);
}

INSTANTIATE_TEST_SUITE_P(EveryWeightType, CudaFormats,
                         ::testing::Values(DType::kF32, DType::kF16, DType::kBF16, DType::kQ4_0,
                                           DType::kQ4_1, DType::kQ5_0, DType::kQ5_1, DType::kQ8_0,
                                           DType::kQ2_K, DType::kQ3_K, DType::kQ4_K, DType::kQ5_K,
                                           DType::kQ6_K, DType::kIQ4_NL),
                         [](const ::testing::TestParamInfo<DType>& p) {
                           return std::string(dtype_name(p.param));
                         });

}  // namespace
}  // namespace duet::cuda
