// The onednn backend's row tiles seen through its plugin (backends/onednn/
// row_tiles_cache.h): tiles made from a weight matrix are never used for
// other weights later at the same address — rewritten in place, or freed and
// allocated again — nor are activations quantized for earlier products
// once their values change in place, and the tiled products agree with the
// gemv kernels'.
// On a CPU whose path has no tile kernel the tests skip, saying so.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "device_tensor.h"
#include "duet/app/plugin_host.h"
#include "duet/dtype.h"
#include "duet/error.h"
#include "duet/quant.h"
#include "onednn_plugin_host.h"
#include "random_floats.h"
#include "random_weight.h"
#include "scoped_cpu_path_env.h"

namespace duet {
namespace {

using testing::DeviceTensor;
using testing::download;
using testing::random_weight;
using testing::same_bits;
using testing::upload;
using testing::zeros;

PluginHost* host() { return testing::onednn_plugin_host(); }

// The onednn backend with row tiles from `tile_rows` rows (0: none), or
// null where this CPU's path has no tile kernel (the option is refused).
std::shared_ptr<Backend> onednn(int tile_rows) {
  Options options("backend.options");
  options.set("threads", "2");
  options.set("row_tiles_min_rows", std::to_string(tile_rows));
  try {
    return host()->create_backend("onednn", options);
  } catch (const Error&) {
    return nullptr;
  }
}

constexpr int64_t kRows = 48, kCols = 64, kBatch = 4;

class OnednnRowTiles : public ::testing::Test {
 protected:
  void SetUp() override {
    if (host() == nullptr) GTEST_SKIP() << "the onednn plugin is not built or is refused here";
    backend_ = onednn(2);
    if (backend_ == nullptr) GTEST_SKIP() << "this CPU's onednn path has no row-tile kernel";
  }

  // x · wᵀ on `backend` for weights already on its device.
  static std::vector<float> product(Backend& backend, const TensorView& w,
                                    const std::vector<float>& x) {
    Device& d = backend.device();
    DeviceTensor xt = upload(d, DType::kF32, {kBatch, kCols}, x);
    DeviceTensor out = zeros(d, {kBatch, kRows});
    backend.ops().matmul(xt.view, w, out.view);
    return download(d, out.view);
  }

  // The same on a backend of its own, which has never seen other weights.
  static std::vector<float> fresh_product(const std::vector<uint8_t>& w,
                                          const std::vector<float>& x) {
    std::shared_ptr<Backend> b = onednn(2);
    DeviceTensor wt = upload(b->device(), DType::kQ4_1, {kRows, kCols}, w);
    return product(*b, wt.view, x);
  }

  std::shared_ptr<Backend> backend_;
};

TEST_F(OnednnRowTiles, WeightsRewrittenInPlaceAreNotMultipliedByStaleTiles) {
  const std::vector<uint8_t> a = random_weight(DType::kQ4_1, kRows, kCols, 1);
  const std::vector<uint8_t> b = random_weight(DType::kQ4_1, kRows, kCols, 2);
  const std::vector<float> x = testdata::random_floats(kBatch * kCols, 3);
  Device& d = backend_->device();
  DeviceTensor w = upload(d, DType::kQ4_1, {kRows, kCols}, a);
  const std::vector<float> ya = product(*backend_, w.view, x);  // tiles of a
  EXPECT_TRUE(same_bits(ya, fresh_product(a, x)));
  d.copy_from_host(w.buffer->data(), b.data(), b.size());
  EXPECT_TRUE(same_bits(product(*backend_, w.view, x), fresh_product(b, x)));
}

TEST_F(OnednnRowTiles, WeightsFreedAndAllocatedAgainAreNotMultipliedByStaleTiles) {
  const std::vector<float> x = testdata::random_floats(kBatch * kCols, 4);
  Device& d = backend_->device();
  for (uint32_t seed = 10; seed < 14; ++seed) {
    // Each matrix in a fresh buffer of the same size, which the allocator
    // often places where the last one was.
    const std::vector<uint8_t> w = random_weight(DType::kQ4_1, kRows, kCols, seed);
    DeviceTensor wt = upload(d, DType::kQ4_1, {kRows, kCols}, w);
    EXPECT_TRUE(same_bits(product(*backend_, wt.view, x), fresh_product(w, x))) << seed;
  }
}

// The backend keeps the last activation rows' quantization for the next
// product of the same rows (a layer's q, k and v): rows rewritten in place
// at the same address, and fewer rows of the same buffer, must be
// quantized again — on one row, on several, and (where the CPU has it) on
// the AMX tiles' 12 or more.
TEST_F(OnednnRowTiles, ActivationsChangedInPlaceAreQuantizedAgain) {
  const std::vector<uint8_t> w = random_weight(DType::kQ4_1, kRows, kCols, 40);
  Device& d = backend_->device();
  DeviceTensor wt = upload(d, DType::kQ4_1, {kRows, kCols}, w);
  for (int64_t n : {1, 5, 20}) {
    std::vector<float> x = testdata::random_floats(n * kCols, 41);
    DeviceTensor xt = upload(d, DType::kF32, {n, kCols}, x);
    DeviceTensor out = zeros(d, {n, kRows});
    // The first `rows` rows' product, into an output whose rows past them
    // must stay as they were (zeros).
    auto product = [&](int64_t rows) {
      const std::vector<float> zero(static_cast<size_t>(n * kRows), 0.0f);
      d.copy_from_host(out.buffer->data(), zero.data(), zero.size() * sizeof(float));
      TensorView xv = xt.view, ov = out.view;
      xv.shape = Shape{rows, kCols};
      ov.shape = Shape{rows, kRows};
      backend_->ops().matmul(xv, wt.view, ov);
      std::vector<float> y = download(d, out.view);
      EXPECT_TRUE(std::all_of(y.begin() + rows * kRows, y.end(), [](float v) { return v == 0.0f; }))
          << "the product of " << rows << " rows wrote past them";
      y.resize(static_cast<size_t>(rows * kRows));
      return y;
    };
    auto fresh = [&](int64_t rows) {
      std::shared_ptr<Backend> b = onednn(2);
      return testing::matmul(*b, DType::kQ4_1, kRows, kCols, w,
                             std::vector<float>(x.begin(), x.begin() + rows * kCols));
    };
    EXPECT_TRUE(same_bits(product(n), fresh(n))) << n << " rows";
    EXPECT_TRUE(same_bits(product(n), fresh(n))) << n << " rows, again";
    x[static_cast<size_t>((n / 2) * kCols + 3)] += 0.5f;  // one value of the middle row
    d.copy_from_host(xt.buffer->data(), x.data(), x.size() * sizeof(float));
    EXPECT_TRUE(same_bits(product(n), fresh(n))) << n << " rows, one value changed";
    if (n > 1) {
      EXPECT_TRUE(same_bits(product(n - 1), fresh(n - 1))) << n - 1 << " of its rows";
    }
  }
}

// The tiles' arithmetic is the gemv kernels' (two 8-bit activation terms)
// with the float additions in another order.
TEST_F(OnednnRowTiles, TiledProductsAgreeWithTheGemvKernels) {
  std::shared_ptr<Backend> gemv = onednn(0);
  ASSERT_NE(gemv, nullptr);
  for (DType type : {DType::kQ4_0, DType::kQ4_1, DType::kQ8_0, DType::kQ5_0}) {
    const std::vector<uint8_t> w = random_weight(type, kRows, kCols, 5);
    const std::vector<float> x = testdata::random_floats(kBatch * kCols, 6);
    const std::vector<float> tiled = testing::matmul(*backend_, type, kRows, kCols, w, x);
    const std::vector<float> plain = testing::matmul(*gemv, type, kRows, kCols, w, x);
    double err = 0.0, ref = 0.0;
    for (size_t i = 0; i < plain.size(); ++i) {
      err += (double{tiled[i]} - plain[i]) * (double{tiled[i]} - plain[i]);
      ref += double{plain[i]} * plain[i];
    }
    EXPECT_LE(err / ref, 1e-10) << dtype_name(type);
  }
}

// Whether the first two rows of x[n, k] · wᵀ are bit for bit those of the
// product of those two rows alone: a tiled product's rows do not depend on
// the rows beside them (row_tiles.h), while GEMM, which takes the f32
// activations, differs from the tiles' quantized ones in the last bits.
bool first_rows_as_tiled_alone(Backend& backend, DType type, int64_t m, int64_t k, int64_t n,
                               uint32_t seed) {
  const std::vector<uint8_t> w = random_weight(type, m, k, seed);
  const std::vector<float> x = testdata::random_floats(n * k, seed + 1);
  const std::vector<float> all = testing::matmul(backend, type, m, k, w, x);
  const std::vector<float> two(x.begin(), x.begin() + 2 * k);
  const std::vector<float> alone = testing::matmul(backend, type, m, k, w, two);
  return same_bits(std::vector<float>(all.begin(), all.begin() + 2 * m), alone);
}

// The onednn backend with 2 threads and `key` set to `value`.
std::shared_ptr<Backend> onednn_with(const std::string& key, const std::string& value) {
  Options options("backend.options");
  options.set("threads", "2");
  options.set(key, value);
  return host()->create_backend("onednn", options);
}

// matmul_min_rows' default on the VNNI path without AMX: GEMM from 512
// rows, but from 4096 for matrices of 2^22 weights or more — and never where
// 512-bit operations run on 256-bit units (Zen 4); a value set holds for all.
TEST_F(OnednnRowTiles, LargeMatricesKeepTheTilesPastTheDefaultGemmRows) {
  if (!testing::onednn_cpu_path_is("avx512_vnni")) {
    GTEST_SKIP() << "the size rule is the AVX-512 VNNI path's; the plugin runs another here "
                    "(the CPU lacks AVX-512 VNNI, or DUET_CPU_PATH picked a lower path)";
  }
  constexpr int64_t kK = 2048, kPrompt = 512;
  std::shared_ptr<Backend> vnni = onednn_with("amx", "off");
  // 2048 x 2048 = 2^22 weights: large, so 512 rows still take the tiles.
  EXPECT_TRUE(first_rows_as_tiled_alone(*vnni, DType::kQ4_0, 2048, kK, kPrompt, 20));
  // A matrix one tile short of it goes to GEMM at 512 rows, except on split
  // units, where it keeps the tiles.
  EXPECT_EQ(first_rows_as_tiled_alone(*vnni, DType::kQ4_0, 2048 - 16, kK, kPrompt, 22),
            testing::onednn_avx512_split());
  std::shared_ptr<Backend> set = onednn_with("matmul_min_rows", "512");
  EXPECT_FALSE(first_rows_as_tiled_alone(*set, DType::kQ4_0, 2048, kK, kPrompt, 20));
}

// On the AVX2 path the matrices with tiles there (q4_0, q4_1, q4_k, q5_0,
// q5_1, q8_0)
// keep them up to 63 rows and take GEMM from 64; the path is picked when the
// plugin registers, so a host of its own loads it with DUET_CPU_PATH=avx2.
TEST(OnednnRowTilesAvx2, TilesTakeUpTo63RowsThenGemm) {
  if (!(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
        __builtin_cpu_supports("f16c"))) {
    GTEST_SKIP() << "this CPU lacks AVX2, FMA or F16C: the onednn plugin has no AVX2 path here";
  }
  PluginHost avx2_host;
  {
    testing::ScopedCpuPathEnv env("avx2");
    ASSERT_TRUE(avx2_host.load(DUET_BUILD_DIR "/plugins/duet-onednn.so").loaded);
  }
  Options options("backend.options");
  options.set("threads", "2");
  std::shared_ptr<Backend> avx2 = avx2_host.create_backend("onednn", options);
  constexpr int64_t kK = 256;
  for (DType type : {DType::kQ4_1, DType::kQ8_0}) {
    SCOPED_TRACE(dtype_name(type));
    EXPECT_TRUE(first_rows_as_tiled_alone(*avx2, type, 64, kK, 63, 40));
    EXPECT_FALSE(first_rows_as_tiled_alone(*avx2, type, 64, kK, 64, 41));
  }
}

// With AMX (where the CPU has it) and `amx: int8`: products of 12 rows or
// more run on the tile unit with the VNNI kernel's results bit for bit, and
// GEMM is no longer the default at any size for the types with tiles (it
// still is for the others); amx: off and matmul_min_rows undo each.
TEST_F(OnednnRowTiles, AmxTakesManyRowsWithTheVnniResults) {
  if (!duet::testing::onednn_amx_usable()) {
    GTEST_SKIP() << "no AMX-INT8 on this CPU (or the OS does not grant its tile state)";
  }
  std::shared_ptr<Backend> amx = onednn_with("amx", "int8");
  std::shared_ptr<Backend> vnni = onednn_with("amx", "off");
  for (DType type : {DType::kQ4_1, DType::kQ6_K, DType::kQ8_0}) {
    const int64_t k = type == DType::kQ6_K ? 512 : 96;
    for (int64_t n : {11, 12, 40, 64, 100}) {
      const std::vector<uint8_t> w = random_weight(type, kRows, k, 30);
      const std::vector<float> x = testdata::random_floats(n * k, 31);
      EXPECT_TRUE(same_bits(testing::matmul(*amx, type, kRows, k, w, x),
                            testing::matmul(*vnni, type, kRows, k, w, x)))
          << dtype_name(type) << ", " << n << " rows";
    }
  }
  // 2032 x 2048 at 512 rows: GEMM without AMX (above), the tiles with it.
  EXPECT_TRUE(first_rows_as_tiled_alone(*amx, DType::kQ4_0, 2048 - 16, 2048, 512, 22));
  std::shared_ptr<Backend> set = onednn_with("matmul_min_rows", "512");
  EXPECT_FALSE(first_rows_as_tiled_alone(*set, DType::kQ4_0, 2048 - 16, 2048, 512, 22));
  // Weights without tiles keep the VNNI path's crossover: GEMM at 512 rows
  // (whose rows differ from the f16 gemv's in the last bits), gemv below.
  EXPECT_FALSE(first_rows_as_tiled_alone(*amx, DType::kF16, 256, 512, 512, 24));
  EXPECT_TRUE(first_rows_as_tiled_alone(*amx, DType::kF16, 256, 512, 511, 24));
}

// `amx: auto` where the CPU also has AMX-BF16: below amx_bf16_min_rows (64;
// 32 for q6_k's half-block tiles) the int8 products' bits; from it the bf16
// products, which are not those bits and lie closer to a double product of
// the dequantized weights.
TEST_F(OnednnRowTiles, AutoTakesTheBf16ProductsFromTheirCrossover) {
  if (!duet::testing::onednn_amx_bf16_usable()) {
    GTEST_SKIP() << "no AMX-BF16 on this CPU (or the OS does not grant its tile state)";
  }
  std::shared_ptr<Backend> bf16 = onednn_with("amx", "auto");
  std::shared_ptr<Backend> int8 = onednn_with("amx", "int8");
  constexpr int64_t kM = 40;  // weight rows: two whole tiles and half of one
  for (DType type : {DType::kQ4_1, DType::kQ6_K, DType::kQ8_0}) {
    const int64_t k = type == DType::kQ6_K ? 512 : 96;
    const std::vector<uint8_t> w = random_weight(type, kM, k, 40);
    std::vector<float> wf(static_cast<size_t>(kM * k));
    const size_t row_bytes = *dtype_row_bytes(type, static_cast<uint64_t>(k));
    for (int64_t r = 0; r < kM; ++r) {
      dequantize_row(type, w.data() + r * row_bytes, wf.data() + r * k, k);
    }
    const int64_t from = type == DType::kQ6_K ? 32 : 64;
    for (int64_t n : {from - 1, from, int64_t{100}}) {
      SCOPED_TRACE(std::string(dtype_name(type)) + ", " + std::to_string(n) + " rows");
      const std::vector<float> x = testdata::random_floats(n * k, 41);
      const std::vector<float> got = testing::matmul(*bf16, type, kM, k, w, x);
      const std::vector<float> ints = testing::matmul(*int8, type, kM, k, w, x);
      if (n < from) {
        EXPECT_TRUE(same_bits(got, ints));
        continue;
      }
      EXPECT_FALSE(same_bits(got, ints));
      double err = 0.0, err_ints = 0.0, norm = 0.0;
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t r = 0; r < kM; ++r) {
          double ref = 0.0;
          for (int64_t c = 0; c < k; ++c) {
            ref += static_cast<double>(wf[r * k + c]) * x[i * k + c];
          }
          const size_t at = static_cast<size_t>(i * kM + r);
          err += (got[at] - ref) * (got[at] - ref);
          err_ints += (ints[at] - ref) * (ints[at] - ref);
          norm += ref * ref;
        }
      }
      EXPECT_LT(err, err_ints);
      EXPECT_LE(err / norm, 1e-10);
    }
  }
}

}  // namespace
}  // namespace duet
