// Tests of the AMX-INT8 row-tile product (backends/onednn/kernels/
// row_tiles_amx.h) for every tile type, on random shapes with a partial last
// weight tile and activation row counts that leave a partial last group of
// 16 (and from 1 to 5 groups), against
//   - the AVX-512 VNNI row-tile product, bit for bit: the same integer sums
//     and float operations (row_tiles_test checks that one against a double
//     product and the gemv kernels);
//   - a double product of the dequantized weights, with two activation
//     terms within row_tiles_test's bound (1e-4), so that a mistake both
//     kernels share cannot pass;
//   - the rows and tiles it may write.
// On a CPU or OS without AMX-INT8 the suite skips, saying why; the refusal
// test then checks that the kernel refuses instead.
#include "kernels/row_tiles_amx.h"

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
#include "kernels/row_tiles.h"
#include "tile_product_checks.h"

namespace duet::onednn {
namespace {

using testing::expect_each_tile_writes_only_its_own;
using testing::Matrix;
using testing::normalized_error;
using testing::packed;
using testing::random_activations;
using testing::random_matrix;
using testing::reference_product;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr int64_t kRows = 37;  // weight rows: two whole tiles and 5 of a third

bool amx_runs() { return amx_int8_usable() && hardware_cpu_path() == CpuPath::kAvx512Vnni; }

struct Case {
  std::vector<std::vector<float>> x;
  std::vector<Q8Activations> xq;
  AmxActivations act;
};

// n activation rows of k values in `terms` terms, quantized and packed.
void make_case(Case& c, int64_t n, int64_t k, int terms, uint32_t seed) {
  c.x.clear();
  c.xq = std::vector<Q8Activations>(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    c.x.push_back(random_activations(k, seed + static_cast<uint32_t>(i)));
    c.xq[static_cast<size_t>(i)].quantize(c.x.back().data(), k, CpuPath::kScalar, terms);
  }
  c.act.reset(n, k, terms);
  c.act.pack(c.xq.data());
}

class RowTilesAmxTest : public ::testing::TestWithParam<std::tuple<DType, int64_t>> {
 protected:
  void SetUp() override {
    if (!amx_runs()) {
      GTEST_SKIP() << "no AMX-INT8 here (cpu features: " << cpu_features_summary()
                   << "; the OS must also grant the tile state)";
    }
  }
};

TEST_P(RowTilesAmxTest, EqualsTheVnniProductBitForBit) {
  const auto [type, k] = GetParam();
  const Matrix m = random_matrix(type, kRows, k, 80);
  const RowTiles tiles = packed(m);
  Case c;
  // Up to 4 groups of 16 rows unpack nibble tiles block by block into a
  // ring, more the whole tile once (row_tiles_amx_kernel.cc): both.
  for (int64_t n : {1, 3, 16, 17, 40, 64, 65, 80}) {
    for (int terms : {1, 2}) {
      SCOPED_TRACE("n " + std::to_string(n) + ", terms " + std::to_string(terms));
      make_case(c, n, k, terms, 90);
      std::vector<float> amx(static_cast<size_t>(n * kRows), kNaN);
      std::vector<float> vnni(amx.size(), kNaN);
      row_tiles_product_amx(tiles, c.act, amx.data(), kRows, 0, tiles.tiles());
      row_tiles_product(CpuPath::kAvx512Vnni, tiles, c.xq.data(), n, vnni.data(), kRows, 0,
                        tiles.tiles());
      EXPECT_EQ(std::memcmp(amx.data(), vnni.data(), amx.size() * sizeof(float)), 0);
      // Two terms against the double product: one term's rounding alone
      // reaches 1.6e-2 on some of these random rows where the offsets m
      // cancel most of a product (q5_1, k = 64, seed 90, the VNNI kernel
      // bit for bit), and the equality above covers one term.
      if (terms == 1) continue;
      for (int64_t i = 0; i < n; ++i) {
        const std::vector<float> yi(amx.begin() + i * kRows, amx.begin() + (i + 1) * kRows);
        EXPECT_LE(normalized_error(yi, reference_product(m, c.x[static_cast<size_t>(i)])), 1e-4)
            << "activation row " << i;
      }
    }
  }
}

TEST_P(RowTilesAmxTest, WritesOnlyItsTilesAndTheActivationRows) {
  const auto [type, k] = GetParam();
  const RowTiles tiles = packed(random_matrix(type, kRows, k, 81));
  Case c;
  make_case(c, 19, k, 2, 91);
  const int64_t ldy = kRows + 7;
  const int64_t n = 19;
  expect_each_tile_writes_only_its_own(tiles, n, ldy, [&](float* y, int64_t begin, int64_t end) {
    row_tiles_product_amx(tiles, c.act, y, ldy, begin, end);
  });
}

INSTANTIATE_TEST_SUITE_P(Formats, RowTilesAmxTest, ::testing::ValuesIn(testing::row_tile_cases()),
                         [](const auto& p) { return testing::type_and_k_name(p.param); });

// The matmul packs each row on the thread that quantized it, in any order,
// over a buffer that held other rows: every block must hold, row by row,
// the row's block of each term, its scales and half sums, and zeros past
// the last row (no AMX needed).
TEST(RowTilesAmx, PackingRowByRowFollowsTheLayout) {
  Case c;
  make_case(c, 37, 96, 2, 93);  // 3 groups, the last partial; 3 blocks each
  Case other;                   // 48 rows: no padding, so the last group is full of their bytes
  make_case(other, 48, 96, 2, 94);
  AmxActivations act;
  act.reset(48, 96, 2);
  act.pack(other.xq.data());
  act.reset(37, 96, 2);  // the same buffer, the same layout
  act.clear_padding();
  for (int64_t row : {36, 0, 17, 5, 35, 1, 2, 3, 4})
    act.pack_row(c.xq[static_cast<size_t>(row)], row);
  for (int64_t row = 6; row < 35; ++row) {
    if (row != 17) act.pack_row(c.xq[static_cast<size_t>(row)], row);
  }
  constexpr int64_t kGroupRows = AmxActivations::kRows;
  for (int64_t g = 0; g < act.groups(); ++g) {
    for (int64_t b = 0; b < act.blocks(); ++b) {
      const int8_t* blk = act.block(g, b);
      const auto* scales = reinterpret_cast<const float*>(blk + 2 * AmxActivations::kTileBytes);
      for (int64_t i = 0; i < kGroupRows; ++i) {
        const int64_t row = g * kGroupRows + i;
        const std::string where = "group " + std::to_string(g) + ", block " + std::to_string(b) +
                                  ", row " + std::to_string(i);
        if (row >= 37) {
          for (int64_t t = 0; t < 2; ++t) {
            for (int64_t j = 0; j < 32; ++j) {
              EXPECT_EQ(blk[t * AmxActivations::kTileBytes + i * 32 + j], 0) << where;
            }
          }
          for (int64_t j = 0; j < 2; ++j) {
            EXPECT_EQ(scales[2 * i + j], 0.0f) << where;
            EXPECT_EQ(scales[2 * kGroupRows + 2 * i + j], 0.0f) << where;
          }
          continue;
        }
        const Q8Activations& x = c.xq[static_cast<size_t>(row)];
        EXPECT_EQ(std::memcmp(blk + i * 32, x.q() + b * 32, 32), 0) << where;
        EXPECT_EQ(std::memcmp(blk + AmxActivations::kTileBytes + i * 32, x.q_lo() + b * 32, 32), 0)
            << where;
        EXPECT_EQ(scales[2 * i], x.scales()[2 * b]) << where;
        EXPECT_EQ(scales[2 * i + 1], x.scales()[2 * b + 1]) << where;
        EXPECT_EQ(scales[2 * kGroupRows + 2 * i], x.half_scales()[2 * b]) << where;
        EXPECT_EQ(scales[2 * kGroupRows + 2 * i + 1], x.half_scales()[2 * b + 1]) << where;
      }
    }
  }
}

TEST(RowTilesAmx, RefusesWithoutAmxAndActivationsOfAnotherLength) {
  const RowTiles tiles = packed(random_matrix(DType::kQ8_0, 16, 64, 82));
  Case c;
  make_case(c, 2, 32, 2, 92);
  std::vector<float> y(32);
  try {
    row_tiles_product_amx(tiles, c.act, y.data(), 16, 0, 1);
    ADD_FAILURE() << "activations of 32 values were taken against k = 64";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInternal);
    const std::string why = amx_runs() ? "k = 64" : "AMX";
    EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace duet::onednn
