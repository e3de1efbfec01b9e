// tile_product_checks.h — what the row-tile kernels' tests (row_tiles_test,
// row_tiles_amx_test, row_tiles_amx_bf16_test) check alike: a matrix packed
// into row tiles, and that a product over a range of tiles writes only its
// own outputs.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernel_test_data.h"
#include "kernels/row_tiles.h"

namespace duet::onednn::testing {

// m's weights packed into row tiles, all of them.
inline RowTiles packed(const Matrix& m) {
  RowTiles tiles(m.type, m.rows, m.k);
  tiles.pack(m.bytes.data(), 0, tiles.tiles());
  return tiles;
}

// product(y, begin, end) writes the products of n activation rows with
// tiles [begin, end) of `tiles` into y, rows ldy apart. Run over all the
// tiles and then over each tile alone, each into n + 2 rows of NaN: each
// tile alone must write rows [0, n) of its own weight rows' columns, as the
// whole run does, and nothing else.
template <class Product>
void expect_each_tile_writes_only_its_own(const RowTiles& tiles, int64_t n, int64_t ldy,
                                          const Product& product) {
  constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> all(static_cast<size_t>((n + 2) * ldy), kNaN);
  product(all.data(), 0, tiles.tiles());
  for (int64_t t = 0; t < tiles.tiles(); ++t) {
    std::vector<float> part(all.size(), kNaN);
    product(part.data(), t, t + 1);
    const int64_t first = t * RowTiles::kRows;
    const int64_t last = std::min(first + RowTiles::kRows, tiles.rows());
    for (int64_t i = 0; i < n + 2; ++i) {
      for (int64_t r = 0; r < ldy; ++r) {
        const float v = part[static_cast<size_t>(i * ldy + r)];
        if (i < n && r >= first && r < last) {
          EXPECT_EQ(v, all[static_cast<size_t>(i * ldy + r)])
              << "tile " << t << ", activation row " << i;
        } else {
          EXPECT_TRUE(std::isnan(v)) << "tile " << t << " wrote row " << i << ", column " << r;
        }
      }
    }
  }
}

}  // namespace duet::onednn::testing
