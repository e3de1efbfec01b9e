// Tests of the AMX-BF16 row-tile product (backends/onednn/kernels/
// row_tiles_amx_bf16.h) for every tile type, on random shapes with a partial
// last weight tile, odd and even numbers of weight tiles and activation row
// counts that leave a partial last group of 16 (1 to 5 groups), against
//   - a double product of the dequantized weights, within 4e-5 (relative
//     error ‖y − ref‖ / ‖ref‖, each activation row; random_matrix's offsets
//     m cancel most of many products, which magnifies every rounding: 2.0e-5
//     at worst when written, 1.1e-5 before the weights' hi was truncated);
//   - the two-term AVX-512 VNNI row-tile product on the same rows, whose
//     worst row must be further from the double product (it was 2 to 7
//     times further when written);
//   - the rows and tiles it may write.
// On a CPU or OS without AMX-BF16 the suite skips, saying why; the refusal
// test then checks that the kernel refuses instead.
#include "kernels/row_tiles_amx_bf16.h"

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

struct Case {
  std::vector<std::vector<float>> x;
  AmxBf16Rows act;
};

// n activation rows of k values, packed last to first.
void make_case(Case& c, int64_t n, int64_t k, uint32_t seed) {
  c.x.clear();
  for (int64_t i = 0; i < n; ++i)
    c.x.push_back(random_activations(k, seed + static_cast<uint32_t>(i)));
  c.act.reset(n, k);
  for (int64_t i = n - 1; i >= 0; --i) c.act.pack_row(c.x[static_cast<size_t>(i)].data(), i);
}

class RowTilesAmxBf16Test : public ::testing::TestWithParam<std::tuple<DType, int64_t>> {
 protected:
  void SetUp() override {
    if (!amx_bf16_usable()) {
      GTEST_SKIP() << "no AMX-BF16 here (cpu features: " << cpu_features_summary()
                   << "; the OS must also grant the tile state)";
    }
  }
};

TEST_P(RowTilesAmxBf16Test, MatchesTheDoubleProduct) {
  const auto [type, k] = GetParam();
  // 37 weight rows: two whole tiles and 5 of a third (a pair, then one
  // alone); 64: four whole tiles (two pairs).
  for (int64_t rows : {37, 64}) {
    const Matrix m = random_matrix(type, rows, k, 80);
    const RowTiles tiles = packed(m);
    Case c;
    for (int64_t n : {1, 3, 16, 17, 40, 64, 65, 80}) {
      SCOPED_TRACE("weight rows " + std::to_string(rows) + ", n " + std::to_string(n));
      make_case(c, n, k, 90);
      std::vector<float> y(static_cast<size_t>(n * rows), kNaN);
      row_tiles_product_amx_bf16(tiles, c.act, y.data(), rows, 0, tiles.tiles());
      std::vector<Q8Activations> xq(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        xq[static_cast<size_t>(i)].quantize(c.x[static_cast<size_t>(i)].data(), k, CpuPath::kScalar,
                                            2);
      }
      std::vector<float> vnni(y.size(), kNaN);
      row_tiles_product(CpuPath::kAvx512Vnni, tiles, xq.data(), n, vnni.data(), rows, 0,
                        tiles.tiles());
      double worst = 0.0;
      double worst_vnni = 0.0;
      for (int64_t i = 0; i < n; ++i) {
        const std::vector<double> ref = reference_product(m, c.x[static_cast<size_t>(i)]);
        const auto row = [&](const std::vector<float>& all) {
          return std::vector<float>(all.begin() + i * rows, all.begin() + (i + 1) * rows);
        };
        const double e = normalized_error(row(y), ref);
        EXPECT_LE(e, 4e-5) << "activation row " << i;
        worst = std::max(worst, e);
        worst_vnni = std::max(worst_vnni, normalized_error(row(vnni), ref));
      }
      EXPECT_LT(worst, worst_vnni);
    }
  }
}

TEST_P(RowTilesAmxBf16Test, WritesOnlyItsTilesAndTheActivationRows) {
  const auto [type, k] = GetParam();
  constexpr int64_t kRows = 37;
  const RowTiles tiles = packed(random_matrix(type, kRows, k, 81));
  Case c;
  const int64_t n = 19;
  make_case(c, n, k, 91);
  const int64_t ldy = kRows + 7;
  expect_each_tile_writes_only_its_own(tiles, n, ldy, [&](float* y, int64_t begin, int64_t end) {
    row_tiles_product_amx_bf16(tiles, c.act, y, ldy, begin, end);
  });
}

INSTANTIATE_TEST_SUITE_P(Formats, RowTilesAmxBf16Test,
                         ::testing::ValuesIn(testing::row_tile_cases()),
                         [](const auto& p) { return testing::type_and_k_name(p.param); });

// Each row of a group, packed in any order over a buffer that held other
// rows, holds its bf16 split: hi the nearest bf16 to x, lo the nearest to
// x - hi; rows past the last are zeros.
TEST(RowTilesAmxBf16, PackingFollowsTheLayout) {
  if (!amx_bf16_usable()) {
    GTEST_SKIP() << "no AMX-BF16 here (cpu features: " << cpu_features_summary() << ")";
  }
  Case other;  // 48 rows: the last group full of their values
  make_case(other, 48, 96, 94);
  Case c;
  c.act = std::move(other.act);
  const int64_t n = 37;
  for (int64_t i = 0; i < n; ++i)
    c.x.push_back(random_activations(96, 93 + static_cast<uint32_t>(i)));
  c.act.reset(n, 96);
  for (int64_t row : {36, 0, 17, 5, 35, 1, 2, 3, 4})
    c.act.pack_row(c.x[static_cast<size_t>(row)].data(), row);
  for (int64_t row = 6; row < 35; ++row) {
    if (row != 17) c.act.pack_row(c.x[static_cast<size_t>(row)].data(), row);
  }
  auto as_float = [](uint16_t bf16) {
    const uint32_t bits = uint32_t{bf16} << 16;
    float f = 0.0f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  };
  for (int64_t g = 0; g < c.act.groups(); ++g) {
    for (int64_t b = 0; b < c.act.blocks(); ++b) {
      const auto* hi = reinterpret_cast<const uint16_t*>(c.act.block(g, b));
      const uint16_t* lo = hi + AmxBf16Rows::kTileBytes / 2;
      for (int64_t i = 0; i < AmxBf16Rows::kRows; ++i) {
        const int64_t row = g * AmxBf16Rows::kRows + i;
        for (int64_t j = 0; j < RowTiles::kBlock; ++j) {
          const std::string where = "row " + std::to_string(row) + ", element " +
                                    std::to_string(b * RowTiles::kBlock + j);
          const float h = as_float(hi[i * 32 + j]);
          const float l = as_float(lo[i * 32 + j]);
          if (row >= n) {
            EXPECT_EQ(hi[i * 32 + j], 0) << where;
            EXPECT_EQ(lo[i * 32 + j], 0) << where;
            continue;
          }
          const float x = c.x[static_cast<size_t>(row)][static_cast<size_t>(b * 32 + j)];
          // hi within half a bf16 step (2^-8 of x), lo within half a step of the rest.
          EXPECT_LE(std::fabs(x - h), std::ldexp(std::fabs(x), -8)) << where;
          EXPECT_LE(std::fabs(x - h - l), std::ldexp(std::fabs(x - h), -8)) << where;
        }
      }
    }
  }
}

TEST(RowTilesAmxBf16, RefusesWithoutAmxAndActivationsOfAnotherLength) {
  const RowTiles tiles = packed(random_matrix(DType::kQ8_0, 16, 64, 82));
  AmxBf16Rows act;
  act.reset(2, 32);  // no packing: refused before any row is read
  std::vector<float> y(32);
  try {
    row_tiles_product_amx_bf16(tiles, act, y.data(), 16, 0, 1);
    ADD_FAILURE() << "activations of 32 values were taken against k = 64";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInternal);
    const std::string why = amx_bf16_usable() ? "k = 64" : "AMX-BF16";
    EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace duet::onednn
