// Tests of the row-tile product (backends/onednn/kernels/row_tiles.h) for
// every format it packs, on random shapes with rows that leave a partial last
// tile, against
//   - a double-precision product of dequantize_row()'d weights and the
//     original activations: normalized error ≤ 1e-2 with one 8-bit
//     activation term and ≤ 1e-4 with two (the bounds of qgemv_test: the
//     error is the activations' rounding);
//   - the gemv kernels on the same path: the same integer block sums added
//     in another order, so |y − y_gemv| ≤ 1e-4 ‖y_gemv‖∞;
//   - exact values, where every float operation is exact: bit for bit the
//     double product, which pins the packing of both tile formats (element
//     and nibble order, q8_0's +128, q4_0's -8d, the offsets m, the
//     K-quants' sub-block scales) independently of rounding.
// The kernel exists for the AVX-512 VNNI path only; on other CPUs the
// product tests skip saying so, and the refusal test runs.
#include "kernels/row_tiles.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "duet/dtype.h"
#include "duet/error.h"
#include "kernel_test_data.h"
#include "kernels/cpu_features.h"
#include "kernels/qgemv.h"

namespace duet::onednn {
namespace {

using testing::Matrix;
using testing::normalized_error;
using testing::random_activations;
using testing::random_matrix;
using testing::reference_product;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr CpuPath kPath = CpuPath::kAvx512Vnni;

bool has_kernel() { return hardware_cpu_path() >= kPath; }

// n activation rows of k values, quantized to `terms` (1 or 2; 3: the odd
// rows one term, the even two).
std::vector<Q8Activations> quantized(const std::vector<std::vector<float>>& x, int64_t k,
                                     int terms) {
  std::vector<Q8Activations> xq(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const int t = terms == 3 ? (i % 2 == 0 ? 2 : 1) : terms;
    xq[i].quantize(x[i].data(), k, kPath, t);
  }
  return xq;
}

RowTiles packed(const Matrix& m) {
  RowTiles tiles(m.type, m.rows, m.k);
  tiles.pack(m.bytes.data(), 0, tiles.tiles());
  return tiles;
}

// y[i * ldy + r] for all n rows, tiles [begin, end); NaN elsewhere.
std::vector<float> tile_product(const RowTiles& tiles, const std::vector<Q8Activations>& xq,
                                int64_t ldy, int64_t begin, int64_t end) {
  std::vector<float> y(xq.size() * static_cast<size_t>(ldy), kNaN);
  row_tiles_product(kPath, tiles, xq.data(), static_cast<int64_t>(xq.size()), y.data(), ldy, begin,
                    end);
  return y;
}

class RowTilesTest : public ::testing::TestWithParam<std::tuple<DType, int64_t>> {
 protected:
  void SetUp() override {
    if (!has_kernel()) {
      GTEST_SKIP() << "this CPU's path is " << cpu_path_name(hardware_cpu_path())
                   << "; the row-tile kernel needs avx512_vnni";
    }
  }
};

// 37 rows: two whole tiles and a partial one of 5.
constexpr int64_t kRows = 37;

TEST_P(RowTilesTest, MatchesTheDoubleProductAndTheGemv) {
  const auto [type, k] = GetParam();
  const Matrix m = random_matrix(type, kRows, k, 30);
  const RowTiles tiles = packed(m);
  for (int64_t n : {1, 2, 3, 8, 9, 17}) {
    std::vector<std::vector<float>> x;
    for (uint32_t i = 0; i < static_cast<uint32_t>(n); ++i)
      x.push_back(random_activations(k, 40 + i));
    for (int terms : {1, 2, 3}) {
      SCOPED_TRACE("n " + std::to_string(n) + ", terms " + std::to_string(terms));
      const std::vector<Q8Activations> xq = quantized(x, k, terms);
      const std::vector<float> y = tile_product(tiles, xq, kRows, 0, tiles.tiles());
      for (int64_t i = 0; i < n; ++i) {
        const std::vector<float> yi(y.begin() + i * kRows, y.begin() + (i + 1) * kRows);
        EXPECT_LE(normalized_error(yi, reference_product(m, x[i])),
                  xq[i].terms() == 1 ? 1e-2 : 1e-4);
        std::vector<float> g(static_cast<size_t>(kRows));
        gemv(kPath, type, m.bytes.data(), k, xq[i], nullptr, g.data(), 0, kRows);
        float g_max = 0.0f;
        for (float v : g) g_max = std::max(g_max, std::fabs(v));
        for (int64_t r = 0; r < kRows; ++r) {
          EXPECT_NEAR(yi[r], g[r], 1e-4 * g_max) << "row " << r << " of activation row " << i;
        }
      }
    }
  }
}

TEST_P(RowTilesTest, IsExactWhenEveryOperationIsExact) {
  const auto [type, k] = GetParam();
  const Matrix m = random_matrix(type, kRows, k, 31, /*exact=*/true);
  const RowTiles tiles = packed(m);
  std::vector<std::vector<float>> x;
  for (uint32_t i = 0; i < 5; ++i) x.push_back(random_activations(k, 50 + i, /*exact=*/true));
  for (int terms : {1, 2}) {
    SCOPED_TRACE("terms " + std::to_string(terms));
    const std::vector<float> y =
        tile_product(tiles, quantized(x, k, terms), kRows, 0, tiles.tiles());
    for (size_t i = 0; i < x.size(); ++i) {
      const std::vector<double> ref = reference_product(m, x[i]);
      for (int64_t r = 0; r < kRows; ++r) {
        EXPECT_EQ(y[i * kRows + r], ref[r]) << "row " << r << " of activation row " << i;
      }
    }
  }
}

TEST_P(RowTilesTest, WritesOnlyItsTilesAndTheMatrixRows) {
  const auto [type, k] = GetParam();
  const Matrix m = random_matrix(type, kRows, k, 32);
  const RowTiles tiles = packed(m);
  std::vector<std::vector<float>> x;
  for (uint32_t i = 0; i < 3; ++i) x.push_back(random_activations(k, 60 + i));
  const std::vector<Q8Activations> xq = quantized(x, k, 2);
  const int64_t ldy = kRows + 11;  // room past the last row that must stay untouched
  const std::vector<float> all = tile_product(tiles, xq, ldy, 0, tiles.tiles());
  for (int64_t begin = 0; begin < tiles.tiles(); ++begin) {
    const std::vector<float> part = tile_product(tiles, xq, ldy, begin, begin + 1);
    for (int64_t i = 0; i < 3; ++i) {
      for (int64_t r = 0; r < ldy; ++r) {
        const float v = part[i * ldy + r];
        if (r >= begin * RowTiles::kRows && r < std::min((begin + 1) * RowTiles::kRows, kRows)) {
          EXPECT_EQ(v, all[i * ldy + r]) << "tile " << begin << ", row " << r;
        } else {
          EXPECT_TRUE(std::isnan(v)) << "tile " << begin << " wrote row " << r;
        }
      }
    }
  }
}

TEST_P(RowTilesTest, ARowsResultDoesNotDependOnTheOtherRows) {
  const auto [type, k] = GetParam();
  const Matrix m = random_matrix(type, kRows, k, 33);
  const RowTiles tiles = packed(m);
  std::vector<std::vector<float>> x;
  for (uint32_t i = 0; i < 11; ++i) x.push_back(random_activations(k, 70 + i));
  const std::vector<float> together =
      tile_product(tiles, quantized(x, k, 2), kRows, 0, tiles.tiles());
  for (size_t i = 0; i < x.size(); ++i) {
    const std::vector<float> alone =
        tile_product(tiles, quantized({x[i]}, k, 2), kRows, 0, tiles.tiles());
    EXPECT_EQ(std::memcmp(alone.data(), together.data() + i * kRows, kRows * sizeof(float)), 0)
        << "activation row " << i;
  }
}

std::string type_and_k_name(const ::testing::TestParamInfo<std::tuple<DType, int64_t>>& p) {
  return std::string(dtype_name(std::get<0>(p.param))) + "_k" +
         std::to_string(std::get<1>(p.param));
}

INSTANTIATE_TEST_SUITE_P(
    Formats, RowTilesTest,
    ::testing::Values(std::tuple{DType::kQ4_0, int64_t{96}}, std::tuple{DType::kQ4_1, int64_t{96}},
                      std::tuple{DType::kQ5_0, int64_t{160}}, std::tuple{DType::kQ5_1, int64_t{64}},
                      std::tuple{DType::kQ8_0, int64_t{576}}, std::tuple{DType::kQ8_0, int64_t{32}},
                      std::tuple{DType::kQ4_K, int64_t{512}},
                      std::tuple{DType::kQ5_K, int64_t{256}}),
    type_and_k_name);

TEST(RowTiles, TypesAndPaths) {
  for (DType t : {DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1, DType::kQ8_0,
                  DType::kQ4_K, DType::kQ5_K}) {
    EXPECT_TRUE(row_tiles_type(t)) << dtype_name(t);
  }
  // Scales every 16 elements, or no blocks at all: the gemv kernels' or GEMM's.
  for (DType t :
       {DType::kQ6_K, DType::kQ2_K, DType::kQ3_K, DType::kF32, DType::kF16, DType::kBF16}) {
    EXPECT_FALSE(row_tiles_type(t)) << dtype_name(t);
  }
  // Nibble tiles are the file's bytes regrouped: no larger than its blocks.
  EXPECT_EQ(tile_format(DType::kQ4_0), TileFormat::kNibbles);
  EXPECT_EQ(tile_format(DType::kQ4_1), TileFormat::kNibbles);
  EXPECT_EQ(tile_format(DType::kQ8_0), TileFormat::kBytes);
  EXPECT_EQ(RowTiles(DType::kQ4_1, 32, 64).bytes(), 32 * 2 * 20);
  EXPECT_EQ(RowTiles(DType::kQ4_0, 32, 64).bytes(), 32 * 2 * 20);  // q4_0's 18 + an unused m
  EXPECT_EQ(RowTiles(DType::kQ8_0, 32, 64).bytes(), 32 * 2 * 40);  // a byte per weight + 2 f32
  EXPECT_THROW(RowTiles(DType::kQ6_K, 16, 256), Error);
  EXPECT_THROW(RowTiles(DType::kQ4_K, 16, 64), Error);  // not whole super-blocks
  EXPECT_TRUE(row_tiles_path(CpuPath::kAvx512Vnni));
  for (CpuPath p : {CpuPath::kScalar, CpuPath::kAvx2, CpuPath::kAvx512}) {
    EXPECT_FALSE(row_tiles_path(p)) << cpu_path_name(p);
  }
}

TEST(RowTiles, RefusesAPathWithoutAKernelAndActivationsOfAnotherLength) {
  const Matrix m = random_matrix(DType::kQ4_1, 16, 64, 34);
  const RowTiles tiles = packed(m);
  Q8Activations xq;
  const std::vector<float> x = random_activations(64, 35);
  xq.quantize(x.data(), 64, CpuPath::kScalar, 2);
  std::vector<float> y(16);
  try {
    row_tiles_product(CpuPath::kAvx512, tiles, &xq, 1, y.data(), 16, 0, 1);
    ADD_FAILURE() << "the avx512 path was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInternal);
  }
  if (!has_kernel()) return;  // the length check follows the path's
  Q8Activations shorter;
  shorter.quantize(x.data(), 32, CpuPath::kScalar, 2);
  EXPECT_THROW(row_tiles_product(kPath, tiles, &shorter, 1, y.data(), 16, 0, 1), Error);
}

}  // namespace
}  // namespace duet::onednn
