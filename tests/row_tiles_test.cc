// Tests of the row-tile product (backends/onednn/kernels/row_tiles.h) for
// every type it packs, on random shapes with rows that leave a partial last
// tile, against
//   - a double-precision product of dequantize_row()'d weights and the
//     original activations: normalized error ≤ 1e-2 with one 8-bit
//     activation term and ≤ 1e-4 with two (the bounds of qgemv_test: the
//     error is the activations' rounding);
//   - the gemv kernels on the same path, for the types they take (not
//     q2_k, q3_k): the same integer block sums added in another order, so
//     |y − y_gemv| ≤ 1e-4 ‖y_gemv‖∞;
//   - exact values, where every float operation is exact: bit for bit the
//     double product, which pins the packing of every tile format (element
//     and nibble order, q8_0's +128, q4_0's -8d, the offsets m, the
//     K-quants' sub-block scales, the halves of q2_k, q3_k and q6_k)
//     independently of rounding.
// Each runnable path with a kernel for the type is tested: AVX-512 VNNI for
// every type, AVX2 for the nibble, fifth-bit and q8_0 tiles (q4_0, q4_1, q4_k,
// q5_0, q5_1, q8_0); a type no path of this
// CPU has a kernel for skips, saying so.
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
#include "tile_product_checks.h"

namespace duet::onednn {
namespace {

using testing::Matrix;
using testing::normalized_error;
using testing::packed;
using testing::random_activations;
using testing::random_matrix;
using testing::reference_product;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// The paths this CPU runs that have a kernel for `type`'s tiles.
std::vector<CpuPath> tile_paths(DType type) {
  std::vector<CpuPath> paths;
  for (CpuPath p : testing::runnable_paths()) {
    if (row_tiles_kernel(p, type)) paths.push_back(p);
  }
  return paths;
}

// n activation rows of k values, quantized to `terms` (1 or 2; 3: the odd
// rows one term, the even two). Every path quantizes to the same bits.
std::vector<Q8Activations> quantized(const std::vector<std::vector<float>>& x, int64_t k,
                                     int terms) {
  std::vector<Q8Activations> xq(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const int t = terms == 3 ? (i % 2 == 0 ? 2 : 1) : terms;
    xq[i].quantize(x[i].data(), k, CpuPath::kScalar, t);
  }
  return xq;
}

// y[i * ldy + r] for all n rows, tiles [begin, end); NaN elsewhere.
std::vector<float> tile_product(CpuPath path, const RowTiles& tiles,
                                const std::vector<Q8Activations>& xq, int64_t ldy, int64_t begin,
                                int64_t end) {
  std::vector<float> y(xq.size() * static_cast<size_t>(ldy), kNaN);
  row_tiles_product(path, tiles, xq.data(), static_cast<int64_t>(xq.size()), y.data(), ldy, begin,
                    end);
  return y;
}

std::vector<std::vector<float>> activation_rows(int64_t n, int64_t k, uint32_t seed,
                                                bool exact = false) {
  std::vector<std::vector<float>> x;
  for (int64_t i = 0; i < n; ++i) {
    x.push_back(random_activations(k, seed + static_cast<uint32_t>(i), exact));
  }
  return x;
}

class RowTilesTest : public ::testing::TestWithParam<std::tuple<DType, int64_t>> {
 protected:
  void SetUp() override {
    paths_ = tile_paths(std::get<0>(GetParam()));
    if (paths_.empty()) {
      GTEST_SKIP() << "this CPU's path is " << cpu_path_name(hardware_cpu_path())
                   << ", which has no kernel for " << dtype_name(std::get<0>(GetParam()))
                   << " tiles";
    }
  }
  std::vector<CpuPath> paths_;
};

// 37 rows: two whole tiles and a partial one of 5 (a partial half on AVX2).
constexpr int64_t kRows = 37;

TEST_P(RowTilesTest, MatchesTheDoubleProductAndTheGemv) {
  const auto [type, k] = GetParam();
  const Matrix m = random_matrix(type, kRows, k, 30);
  const RowTiles tiles = packed(m);
  for (CpuPath path : paths_) {
    for (int64_t n : {1, 2, 3, 5, 8, 9, 17}) {
      const std::vector<std::vector<float>> x = activation_rows(n, k, 40);
      for (int terms : {1, 2, 3}) {
        SCOPED_TRACE(std::string(cpu_path_name(path)) + ", n " + std::to_string(n) + ", terms " +
                     std::to_string(terms));
        const std::vector<Q8Activations> xq = quantized(x, k, terms);
        const std::vector<float> y = tile_product(path, tiles, xq, kRows, 0, tiles.tiles());
        for (int64_t i = 0; i < n; ++i) {
          const std::vector<float> yi(y.begin() + i * kRows, y.begin() + (i + 1) * kRows);
          // One term: 1e-2, except q4_k, whose random 6-bit minimums make an
          // offset term that cancels most of the product (k = 256, 17 rows:
          // 0.0121 for one row, which the gemv below matches to 1e-4 of
          // its largest output, so the activations' rounding, not a kernel).
          const double one_term = type == DType::kQ4_K ? 2e-2 : 1e-2;
          EXPECT_LE(normalized_error(yi, reference_product(m, x[i])),
                    xq[i].terms() == 1 ? one_term : 1e-4);
          if (!qgemv_block_type(type)) continue;
          std::vector<float> g(static_cast<size_t>(kRows));
          gemv(path, type, m.bytes.data(), k, xq[i], nullptr, g.data(), 0, kRows);
          float g_max = 0.0f;
          for (float v : g) g_max = std::max(g_max, std::fabs(v));
          for (int64_t r = 0; r < kRows; ++r) {
            EXPECT_NEAR(yi[r], g[r], 1e-4 * g_max) << "row " << r << " of activation row " << i;
          }
        }
      }
    }
  }
}

TEST_P(RowTilesTest, IsExactWhenEveryOperationIsExact) {
  const auto [type, k] = GetParam();
  const Matrix m = random_matrix(type, kRows, k, 31, /*exact=*/true);
  const RowTiles tiles = packed(m);
  const std::vector<std::vector<float>> x = activation_rows(5, k, 50, /*exact=*/true);
  for (CpuPath path : paths_) {
    for (int terms : {1, 2}) {
      SCOPED_TRACE(std::string(cpu_path_name(path)) + ", terms " + std::to_string(terms));
      const std::vector<float> y =
          tile_product(path, tiles, quantized(x, k, terms), kRows, 0, tiles.tiles());
      for (size_t i = 0; i < x.size(); ++i) {
        const std::vector<double> ref = reference_product(m, x[i]);
        for (int64_t r = 0; r < kRows; ++r) {
          EXPECT_EQ(y[i * kRows + r], ref[r]) << "row " << r << " of activation row " << i;
        }
      }
    }
  }
}

TEST_P(RowTilesTest, WritesOnlyItsTilesAndTheMatrixRows) {
  const auto [type, k] = GetParam();
  const Matrix m = random_matrix(type, kRows, k, 32);
  const RowTiles tiles = packed(m);
  const std::vector<Q8Activations> xq = quantized(activation_rows(3, k, 60), k, 2);
  const int64_t ldy = kRows + 11;  // room past the last row that must stay untouched
  for (CpuPath path : paths_) {
    SCOPED_TRACE(cpu_path_name(path));
    const std::vector<float> all = tile_product(path, tiles, xq, ldy, 0, tiles.tiles());
    for (int64_t begin = 0; begin < tiles.tiles(); ++begin) {
      const std::vector<float> part = tile_product(path, tiles, xq, ldy, begin, begin + 1);
      const int64_t first = begin * RowTiles::kRows;
      const int64_t last = std::min(first + RowTiles::kRows, kRows);
      for (int64_t i = 0; i < 3; ++i) {
        for (int64_t r = 0; r < ldy; ++r) {
          const float v = part[i * ldy + r];
          if (r >= first && r < last) {
            EXPECT_EQ(v, all[i * ldy + r]) << "tile " << begin << ", row " << r;
          } else {
            EXPECT_TRUE(std::isnan(v)) << "tile " << begin << " wrote row " << r;
          }
        }
      }
    }
  }
}

TEST_P(RowTilesTest, ARowsResultDoesNotDependOnTheOtherRows) {
  const auto [type, k] = GetParam();
  const Matrix m = random_matrix(type, kRows, k, 33);
  const RowTiles tiles = packed(m);
  const std::vector<std::vector<float>> x = activation_rows(11, k, 70);
  for (CpuPath path : paths_) {
    const std::vector<float> together =
        tile_product(path, tiles, quantized(x, k, 2), kRows, 0, tiles.tiles());
    for (size_t i = 0; i < x.size(); ++i) {
      const std::vector<float> alone =
          tile_product(path, tiles, quantized({x[i]}, k, 2), kRows, 0, tiles.tiles());
      EXPECT_EQ(std::memcmp(alone.data(), together.data() + i * kRows, kRows * sizeof(float)), 0)
          << cpu_path_name(path) << ", activation row " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, RowTilesTest, ::testing::ValuesIn(testing::row_tile_cases()),
                         [](const auto& p) { return testing::type_and_k_name(p.param); });

TEST(RowTiles, TypesPathsAndSizes) {
  for (DType t :
       {DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1, DType::kQ8_0, DType::kIQ4_NL,
        DType::kQ2_K, DType::kQ3_K, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K}) {
    EXPECT_TRUE(row_tiles_type(t)) << dtype_name(t);
  }
  // No blocks at all: the gemv kernels' or GEMM's.
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
    EXPECT_FALSE(row_tiles_type(t)) << dtype_name(t);
  }
  // Nibble tiles are the file's bytes regrouped: no larger than its blocks.
  EXPECT_EQ(tile_format(DType::kQ4_0), TileFormat::kNibbles);
  EXPECT_EQ(tile_format(DType::kQ4_1), TileFormat::kNibbles);
  EXPECT_EQ(tile_format(DType::kIQ4_NL), TileFormat::kNibbles);  // levels looked up in the kernel
  EXPECT_EQ(tile_format(DType::kQ8_0), TileFormat::kBytes);
  EXPECT_EQ(tile_format(DType::kQ4_K), TileFormat::kSuperNibbles);
  EXPECT_EQ(tile_format(DType::kQ5_K), TileFormat::kSuperFiveBits);
  EXPECT_TRUE(super_blocks(TileFormat::kSuperFiveBits));
  EXPECT_FALSE(nibble_tiles(DType::kQ5_K));  // no AVX2 kernel for its fifth bits
  // q5_k: q4_k's tiles (144 bytes per row and super-block) and 32 bytes of
  // fifth bits, the file's 176 with the scales unpacked.
  EXPECT_EQ(RowTiles(DType::kQ5_K, 32, 256).bytes(), 32 * 180);
  for (DType t : {DType::kQ4_0, DType::kQ4_1, DType::kIQ4_NL, DType::kQ4_K}) {
    EXPECT_TRUE(nibble_tiles(t)) << dtype_name(t);
  }
  for (DType t : {DType::kQ8_0, DType::kQ5_K, DType::kQ6_K}) EXPECT_FALSE(nibble_tiles(t));
  EXPECT_EQ(tile_format(DType::kQ6_K), TileFormat::kSixBits);
  EXPECT_TRUE(half_scales(TileFormat::kSixBits));
  EXPECT_TRUE(half_scales(TileFormat::kHalves));
  EXPECT_FALSE(half_scales(TileFormat::kBytes));
  EXPECT_EQ(tile_format(DType::kQ2_K), TileFormat::kHalves);
  EXPECT_EQ(tile_format(DType::kQ3_K), TileFormat::kHalves);
  EXPECT_EQ(RowTiles(DType::kQ4_1, 32, 64).bytes(), 32 * 2 * 20);
  EXPECT_EQ(RowTiles(DType::kQ4_0, 32, 64).bytes(), 32 * 2 * 20);    // q4_0's 18 + an unused m
  EXPECT_EQ(RowTiles(DType::kIQ4_NL, 32, 64).bytes(), 32 * 2 * 20);  // likewise
  // A byte per weight + d as f32 (m = -128d derived).
  EXPECT_EQ(RowTiles(DType::kQ8_0, 32, 64).bytes(), 32 * 2 * 36);
  // q5_0 and q5_1: the nibble tiles' 20 bytes and the fifth bits' 4 — the
  // file's 22 and 24 — so that decode's single row takes them.
  EXPECT_EQ(tile_format(DType::kQ5_0), TileFormat::kFiveBits);
  EXPECT_EQ(tile_format(DType::kQ5_1), TileFormat::kFiveBits);
  EXPECT_EQ(RowTiles(DType::kQ5_0, 32, 64).bytes(), 32 * 2 * 24);
  EXPECT_EQ(RowTiles(DType::kQ5_1, 32, 64).bytes(), 32 * 2 * 24);
  EXPECT_TRUE(row_tiles_kernel(CpuPath::kAvx2, DType::kQ5_0));  // 4 vectors per 16-bit sum
  EXPECT_TRUE(row_tiles_kernel(CpuPath::kAvx2, DType::kQ5_1));
  // A byte per weight + 4 f32 per 32 (d and m per half).
  EXPECT_EQ(RowTiles(DType::kQ3_K, 32, 256).bytes(), 32 * 8 * 48);
  // q6_k: 6 bits per weight, the f16 d and two int8 scales per 32: the
  // file's 26.25 bytes per 32 with its d repeated.
  EXPECT_EQ(RowTiles(DType::kQ6_K, 32, 256).bytes(), 32 * 8 * 28);
  // q4_k: per row and super-block its 4 bytes of d and dmin, 8 + 8 scale
  // and min bytes, 128 of nibbles (the file's 144 with the scales unpacked).
  EXPECT_EQ(RowTiles(DType::kQ4_K, 32, 512).bytes(), 32 * 2 * (4 + 16 + 128));
  EXPECT_THROW(RowTiles(DType::kQ6_K, 16, 128), Error);  // not whole super-blocks
  EXPECT_THROW(RowTiles(DType::kQ4_K, 16, 64), Error);   // not whole super-blocks
  // VNNI multiplies every tile type; AVX2 the nibbles, fifth bits and
  // q8_0's bytes (taken back to signed bytes: u = w + 128 would saturate
  // its 16-bit sums); AVX-512 without VNNI and scalar none.
  for (CpuPath p : {CpuPath::kScalar, CpuPath::kAvx512}) {
    EXPECT_FALSE(row_tiles_path(p)) << cpu_path_name(p);
    EXPECT_FALSE(row_tiles_kernel(p, DType::kQ4_1)) << cpu_path_name(p);
  }
  for (CpuPath p : {CpuPath::kAvx2, CpuPath::kAvx512Vnni}) {
    EXPECT_TRUE(row_tiles_path(p)) << cpu_path_name(p);
    EXPECT_TRUE(row_tiles_kernel(p, DType::kQ4_0)) << cpu_path_name(p);
    EXPECT_TRUE(row_tiles_kernel(p, DType::kQ4_1)) << cpu_path_name(p);
    EXPECT_TRUE(row_tiles_kernel(p, DType::kQ8_0)) << cpu_path_name(p);
    // iq4_nl's level bytes would saturate AVX2's 16-bit sums.
    EXPECT_EQ(row_tiles_kernel(p, DType::kIQ4_NL), p == CpuPath::kAvx512Vnni) << cpu_path_name(p);
    EXPECT_EQ(row_tiles_from_one_row(p, DType::kIQ4_NL), p == CpuPath::kAvx512Vnni)
        << cpu_path_name(p);
    EXPECT_TRUE(row_tiles_kernel(p, DType::kQ4_K)) << cpu_path_name(p);  // nibbles too
    // One row: tiles about the file's size where their kernel beats the
    // gemv's; not q2_k/q3_k's half-block tiles (1.5 bytes per weight).
    for (DType t : {DType::kQ4_1, DType::kQ5_0, DType::kQ5_1}) {
      EXPECT_TRUE(row_tiles_from_one_row(p, t)) << dtype_name(t) << " " << cpu_path_name(p);
    }
    for (DType t : {DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kQ8_0}) {
      EXPECT_EQ(row_tiles_from_one_row(p, t), p == CpuPath::kAvx512Vnni)
          << dtype_name(t) << " " << cpu_path_name(p);
    }
    for (DType t : {DType::kQ2_K, DType::kQ3_K}) {
      EXPECT_FALSE(row_tiles_from_one_row(p, t)) << dtype_name(t) << " " << cpu_path_name(p);
    }
    EXPECT_EQ(row_tiles_kernel(p, DType::kQ5_K), p == CpuPath::kAvx512Vnni) << cpu_path_name(p);
    EXPECT_EQ(row_tiles_kernel(p, DType::kQ6_K), p == CpuPath::kAvx512Vnni) << cpu_path_name(p);
    EXPECT_EQ(row_tiles_kernel(p, DType::kQ2_K), p == CpuPath::kAvx512Vnni) << cpu_path_name(p);
  }
}

TEST(RowTiles, RefusesAPathWithoutAKernelAndActivationsOfAnotherLength) {
  Q8Activations xq;
  const std::vector<float> x = random_activations(64, 35);
  xq.quantize(x.data(), 64, CpuPath::kScalar, 2);
  std::vector<float> y(16);
  // q8_0's byte tiles have no kernel but VNNI's and AVX2's; nor have
  // iq4_nl's nibbles on AVX2, whose levels (up to 241) would saturate
  // vpmaddubsw's sums.
  for (const auto& [type, refusing] :
       {std::pair{DType::kQ8_0, std::vector{CpuPath::kScalar, CpuPath::kAvx512}},
        std::pair{DType::kIQ4_NL, std::vector{CpuPath::kAvx2}}}) {
    const RowTiles tiles = packed(random_matrix(type, 16, 64, 34));
    for (CpuPath p : refusing) {
      try {
        row_tiles_product(p, tiles, &xq, 1, y.data(), 16, 0, 1);
        ADD_FAILURE() << dtype_name(type) << " tiles were accepted on " << cpu_path_name(p);
      } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kInternal);
        EXPECT_NE(std::string(e.what()).find(dtype_name(type)), std::string::npos) << e.what();
      }
    }
  }
  const RowTiles tiles = packed(random_matrix(DType::kQ8_0, 16, 64, 34));
  const std::vector<CpuPath> paths = tile_paths(DType::kQ8_0);
  if (paths.empty()) return;  // the length check follows the path's
  Q8Activations shorter;
  shorter.quantize(x.data(), 32, CpuPath::kScalar, 2);
  EXPECT_THROW(row_tiles_product(paths.front(), tiles, &shorter, 1, y.data(), 16, 0, 1), Error);
}

}  // namespace
}  // namespace duet::onednn
