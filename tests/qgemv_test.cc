// Tests of the onednn backend's CPU kernels (backends/onednn/kernels):
// runtime path selection and its DUET_CPU_PATH override, activation
// quantization, and gemv / gemv_batch on every path this CPU can run (scalar
// always), each compared with
//   - a double-precision product of dequantize_row()'d weights and the
//     original f32 activations: normalized error ‖y − y_ref‖ / ‖y_ref‖ ≤ 1e-2
//     for quantized weights (the activations are rounded to 8 bits: per
//     element error ≤ d/2 with d = block max / 127, about 0.4% of the rms of
//     uniform activations), ≤ 1e-4 with two 8-bit terms (error ≤ d/512) and
//     ≤ 1e-5 for f32/f16 weights (f32 rounding only);
//   - the scalar path: every path forms the same integer block sums and only
//     adds the scaled sums in another order, so |y − y_scalar| ≤ 1e-4 ‖y_scalar‖∞;
//   - exact values, for weights and activations chosen so that every float
//     operation is exact: then every path must match the double product bit
//     for bit, which pins the integer arithmetic (nibble order, sign handling
//     of q8_0's -128, q4_0's offset, q4_1's minimum) independently of rounding.
#include "kernels/qgemv.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <limits>
#include <ostream>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "bench_system.h"
#include "duet/dtype.h"
#include "duet/error.h"
#include "duet/quant.h"
#include "kernel_test_data.h"
#include "kernels/cpu_features.h"
#include "scoped_cpu_path_env.h"

namespace duet {

void PrintTo(DType type, std::ostream* os) { *os << dtype_name(type); }

namespace onednn {
namespace {

using testing::Matrix;
using testing::normalized_error;
using testing::random_activations;
using testing::random_matrix;
using testing::reference_product;
using testing::runnable_paths;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

using duet::testing::ScopedCpuPathEnv;

// y over all rows with the given path: NaN outside [row_begin, row_end).
std::vector<float> product(CpuPath path, const Matrix& m, const std::vector<float>& x,
                           int64_t row_begin, int64_t row_end, int terms = 1) {
  Q8Activations xq;
  if (qgemv_block_type(m.type)) xq.quantize(x.data(), m.k, path, terms);
  std::vector<float> y(static_cast<size_t>(m.rows), kNaN);
  gemv(path, m.type, m.bytes.data(), m.k, xq, x.data(), y.data(), row_begin, row_end);
  return y;
}

// ---- CPU paths ----------------------------------------------------------------

TEST(QgemvCpuPath, NamesAreStable) {
  EXPECT_STREQ(cpu_path_name(CpuPath::kScalar), "scalar");
  EXPECT_STREQ(cpu_path_name(CpuPath::kAvx2), "avx2");
  EXPECT_STREQ(cpu_path_name(CpuPath::kAvx512), "avx512");
  EXPECT_STREQ(cpu_path_name(CpuPath::kAvx512Vnni), "avx512_vnni");
}

TEST(QgemvCpuPath, SummaryAgreesWithTheHardwarePath) {
  const std::string summary = cpu_features_summary();
  std::cout << "hardware path " << cpu_path_name(hardware_cpu_path()) << "; features: " << summary
            << "\n";
  const CpuPath hw = hardware_cpu_path();
  const auto has = [&](const char* f) {
    return (" " + summary + " ").find(std::string(" ") + f + " ") != std::string::npos;
  };
  EXPECT_EQ(hw >= CpuPath::kAvx2, has("avx2") && has("fma") && has("f16c"));
  EXPECT_EQ(hw >= CpuPath::kAvx512,
            has("avx2") && has("avx512f") && has("avx512bw") && has("avx512vl"));
  EXPECT_EQ(hw >= CpuPath::kAvx512Vnni, hw >= CpuPath::kAvx512 && has("avx512_vnni"));
}

// avx512_split_units() against Linux's own reading of cpuid: the first
// processor's vendor_id, cpu family and flags in /proc/cpuinfo.
TEST(QgemvCpuPath, SplitUnitsAreZen4Only) {
  const std::string cpuinfo = bench::read_text_file("/proc/cpuinfo");
  const std::string vendor = bench::proc_field(cpuinfo, "vendor_id");
  const std::string family = bench::proc_field(cpuinfo, "cpu family");
  const std::string flags = bench::proc_field(cpuinfo, "flags");
  if (vendor.empty() || family.empty() || flags.empty()) {
    GTEST_SKIP() << "/proc/cpuinfo lacks vendor_id, cpu family or flags to compare with";
  }
  const bool expected = vendor == "AuthenticAMD" && std::stoi(family) == 25 &&
                        (" " + flags + " ").find(" avx512f ") != std::string::npos;
  EXPECT_EQ(avx512_split_units(), expected) << "vendor " << vendor << ", family " << family;
  const std::string summary = " " + cpu_features_summary() + " ";
  EXPECT_EQ(summary.find(" avx512_split ") != std::string::npos, expected) << summary;
}

TEST(QgemvCpuPath, UnsetOverrideGivesTheHardwarePath) {
  ScopedCpuPathEnv env(nullptr);
  EXPECT_EQ(detect_cpu_path(), hardware_cpu_path());
  ScopedCpuPathEnv empty("");
  EXPECT_EQ(detect_cpu_path(), hardware_cpu_path());
}

TEST(QgemvCpuPath, OverrideOnlyLowersThePath) {
  for (CpuPath p : {CpuPath::kScalar, CpuPath::kAvx2, CpuPath::kAvx512, CpuPath::kAvx512Vnni}) {
    ScopedCpuPathEnv env(cpu_path_name(p));
    EXPECT_EQ(detect_cpu_path(), std::min(p, hardware_cpu_path())) << cpu_path_name(p);
  }
}

TEST(QgemvCpuPath, UnknownOverrideIsAConfigError) {
  ScopedCpuPathEnv env("avx1024");
  try {
    detect_cpu_path();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kConfig);
    EXPECT_NE(std::string(e.what()).find("avx1024"), std::string::npos) << e.what();
  }
}

TEST(QgemvCpuPath, OverriddenPathRunsTheProduct) {
  // What a backend does: pick the path once, then use it.
  ScopedCpuPathEnv env("scalar");
  const Matrix m = random_matrix(DType::kQ4_1, 8, 64, 1);
  const std::vector<float> x = random_activations(64, 2);
  const CpuPath path = detect_cpu_path();
  ASSERT_EQ(path, CpuPath::kScalar);
  EXPECT_EQ(product(path, m, x, 0, 8), product(CpuPath::kScalar, m, x, 0, 8));
}

// ---- activation quantization ------------------------------------------------------

// x quantized on every runnable path, with one term and with two, gives
// the portable code's bytes — values, second terms, scales and half-block
// sums — in every block but those listed.
void expect_every_path_quantizes_as_portable(const std::vector<float>& x,
                                             const std::vector<int64_t>& skipped_blocks) {
  const auto k = static_cast<int64_t>(x.size());
  auto skipped = [&](int64_t b) {
    return std::find(skipped_blocks.begin(), skipped_blocks.end(), b) != skipped_blocks.end();
  };
  for (int terms : {1, 2}) {
    Q8Activations want;
    want.quantize(x.data(), k, CpuPath::kScalar, terms);
    for (CpuPath path : runnable_paths()) {
      const std::string where = std::string(cpu_path_name(path)) + ", " + std::to_string(terms);
      Q8Activations other;
      other.quantize(x.data(), k, path, terms);
      for (int64_t b = 0; b < k / 32; ++b) {
        if (skipped(b)) continue;
        const std::string at = where + ", block " + std::to_string(b);
        EXPECT_EQ(std::memcmp(other.q() + 32 * b, want.q() + 32 * b, 32), 0) << at;
        if (terms == 2) {
          EXPECT_EQ(std::memcmp(other.q_lo() + 32 * b, want.q_lo() + 32 * b, 32), 0) << at;
        }
        EXPECT_EQ(std::memcmp(other.scales() + 2 * b, want.scales() + 2 * b, 2 * sizeof(float)), 0)
            << at;
        EXPECT_EQ(
            std::memcmp(other.half_scales() + 2 * b, want.half_scales() + 2 * b, 2 * sizeof(float)),
            0)
            << at;
      }
    }
  }
}

TEST(QgemvActivations, FollowsTheDefinitionOnEveryPath) {
  const int64_t k = 96;
  std::vector<float> x = random_activations(k, 3);
  std::fill(x.begin() + 32, x.begin() + 64, 0.0f);  // an all-zero block
  Q8Activations scalar;
  scalar.quantize(x.data(), k);
  ASSERT_EQ(scalar.k(), k);
  ASSERT_EQ(scalar.blocks(), 3);
  for (int64_t b = 0; b < 3; ++b) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
    const float d = amax / 127.0f;
    EXPECT_EQ(scalar.scales()[2 * b], d);
    int sum = 0;
    for (int j = 0; j < 32; ++j) {
      const int8_t q = scalar.q()[b * 32 + j];
      sum += q;
      if (d == 0.0f) {
        EXPECT_EQ(q, 0);
      } else {
        EXPECT_LE(std::fabs(x[b * 32 + j] - d * q), d * 0.5f + 1e-7f) << b << " " << j;
      }
    }
    EXPECT_EQ(scalar.scales()[2 * b + 1], d * static_cast<float>(sum));
  }
  // Zero padding up to whole groups of kPadBlocks blocks.
  for (int64_t i = k; i < Q8Activations::kPadBlocks * 32; ++i) EXPECT_EQ(scalar.q()[i], 0);
  for (int64_t i = 6; i < Q8Activations::kPadBlocks * 2; ++i) EXPECT_EQ(scalar.scales()[i], 0.0f);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(scalar.q()) % 64, 0u);

  for (CpuPath path : runnable_paths()) {
    Q8Activations other;
    other.quantize(x.data(), k, path);
    EXPECT_EQ(std::memcmp(other.q(), scalar.q(), k), 0) << cpu_path_name(path);
    EXPECT_EQ(std::memcmp(other.scales(), scalar.scales(), 3 * 2 * sizeof(float)), 0)
        << cpu_path_name(path);
  }
}

TEST(QgemvActivations, SecondTermFollowsTheDefinitionOnEveryPath) {
  const int64_t k = 96;
  std::vector<float> x = random_activations(k, 5);
  std::fill(x.begin() + 32, x.begin() + 64, 0.0f);  // an all-zero block
  x[70] = 40.0f;  // an outlier: the other values of its block keep few bits
  Q8Activations one;
  one.quantize(x.data(), k);
  Q8Activations two;
  two.quantize(x.data(), k, CpuPath::kScalar, 2);
  ASSERT_EQ(two.terms(), 2);
  ASSERT_EQ(one.q_lo(), nullptr);
  ASSERT_NE(two.q_lo(), nullptr);
  EXPECT_EQ(std::memcmp(one.q(), two.q(), k), 0) << "the first term is the one-term quantization";
  for (int64_t b = 0; b < 3; ++b) {
    const float d = one.scales()[2 * b];
    EXPECT_EQ(two.scales()[2 * b], d / 256.0f);
    int sum = 0;
    for (int j = 0; j < 32; ++j) {
      const int64_t i = b * 32 + j;
      const int v = 256 * two.q()[i] + two.q_lo()[i];
      sum += v;
      EXPECT_LE(std::abs(two.q_lo()[i]), 127);
      // Within half a unit (d/512) of x, or a whole unit where the clamp to
      // ±127 cut a remainder of about d/2: far closer than one term's d/2.
      const float bound = std::abs(two.q_lo()[i]) == 127 ? d / 256.0f : d / 512.0f;
      EXPECT_LE(std::fabs(x[i] - d / 256.0f * static_cast<float>(v)), bound * 1.001f + 1e-12f)
          << b << " " << j;
    }
    EXPECT_EQ(two.scales()[2 * b + 1], d / 256.0f * static_cast<float>(sum));
  }
  for (int64_t i = k; i < Q8Activations::kPadBlocks * 32; ++i) EXPECT_EQ(two.q_lo()[i], 0);
  // Every path the same bits, the half-block sums included, with one term
  // and with two.
  expect_every_path_quantizes_as_portable(x, {});
}

// A block whose scale d is so small that 256 / d overflows keeps a first
// term and gets no second one, on every path, instead of converting inf.
TEST(QgemvActivations, ATinyBlockGetsNoSecondTerm) {
  std::vector<float> x(32, 0.0f);
  x[3] = 1e-36f;
  x[7] = -5e-37f;
  for (CpuPath path : runnable_paths()) {
    Q8Activations xq;
    xq.quantize(x.data(), 32, path, 2);
    EXPECT_EQ(xq.q()[3], 127) << cpu_path_name(path);
    for (int i = 0; i < 32; ++i) EXPECT_EQ(xq.q_lo()[i], 0) << cpu_path_name(path) << " " << i;
    EXPECT_TRUE(std::isfinite(xq.scales()[0]) && std::isfinite(xq.scales()[1]));
  }
}

// Rows of many blocks — the AVX-512 paths quantize 16 blocks at a time —
// with a remainder, and blocks of every kind: all zeros, an outlier, one
// too small for a second term, one too small for a first, an inf, a NaN. Every path gives the
// portable code's bits, with one term and with two, wherever a block is
// finite.
TEST(QgemvActivations, LongRowsGiveThePortableBitsOnEveryPath) {
  const int64_t k = 37 * 32;
  std::vector<float> x = random_activations(k, 9);
  std::fill(x.begin() + 32 * 3, x.begin() + 32 * 4, 0.0f);
  x[32 * 17 + 5] = 90.0f;
  std::fill(x.begin() + 32 * 20, x.begin() + 32 * 21, 0.0f);
  x[32 * 20 + 2] = 1e-36f;  // 256 / d overflows: no second term
  std::fill(x.begin() + 32 * 22, x.begin() + 32 * 23, 0.0f);
  x[32 * 22 + 7] = -1e-37f;  // 1 / d overflows too: q = 0
  x[32 * 33 + 9] = std::numeric_limits<float>::infinity();
  x[32 * 35 + 1] = std::numeric_limits<float>::quiet_NaN();
  // The blocks holding an inf or a NaN get whatever each path's conversion
  // makes of them (their scales too); the blocks around them must agree.
  expect_every_path_quantizes_as_portable(x, {33, 35});
}

// The many-vector kernels' inputs: q and q_lo regrouped per 4 blocks (first
// halves, then second halves) and the -128 * Σ of each 4 values, over the
// padded length too (zeros there).
TEST(QgemvActivations, DerivedFormsFollowTheirDefinition) {
  constexpr int64_t k = 32 * 11;  // 11 blocks, padded to 16
  const std::vector<float> x = random_activations(k, 7);
  Q8Activations xq;
  xq.quantize(x.data(), k, CpuPath::kScalar, 2);
  const int64_t padded = 16 * 32;
  auto check = [&](const int8_t* q, const int8_t* regrouped, const int32_t* bias,
                   const char* name) {
    for (int64_t i = 0; i < padded; ++i) {
      const int64_t group = i / 128, within = i % 128;
      const int64_t block = 4 * group + within % 64 / 16;
      const int64_t value = within / 64 * 16 + within % 16;
      ASSERT_EQ(regrouped[i], q[block * 32 + value]) << name << " regrouped byte " << i;
    }
    for (int64_t i = 0; i < padded / 4; ++i) {
      ASSERT_EQ(bias[i], -128 * (q[4 * i] + q[4 * i + 1] + q[4 * i + 2] + q[4 * i + 3]))
          << name << " bias " << i;
    }
    EXPECT_EQ(bias[padded / 4 - 1], 0) << name << ": padding";
  };
  check(xq.q(), xq.q_regrouped(), xq.q_bias(), "q");
  check(xq.q_lo(), xq.q_lo_regrouped(), xq.q_lo_bias(), "q_lo");
  xq.quantize(x.data(), k, CpuPath::kScalar, 1);
  EXPECT_EQ(xq.q_lo_regrouped(), nullptr);
  EXPECT_EQ(xq.q_lo_bias(), nullptr);
}

TEST(QgemvActivations, ReuseForAShorterVectorRepadsIt) {
  const std::vector<float> x = random_activations(1536, 4);
  Q8Activations xq;
  xq.quantize(x.data(), 1536);
  xq.quantize(x.data(), 96);
  EXPECT_EQ(xq.k(), 96);
  for (int64_t i = 96; i < Q8Activations::kPadBlocks * 32; ++i) ASSERT_EQ(xq.q()[i], 0) << i;
  for (int64_t i = 6; i < Q8Activations::kPadBlocks * 2; ++i) ASSERT_EQ(xq.scales()[i], 0.0f) << i;
}

TEST(QgemvActivations, RejectsALengthThatIsNotWholeBlocks) {
  const std::vector<float> x(40, 1.0f);
  Q8Activations xq;
  EXPECT_THROW(xq.quantize(x.data(), 40), Error);
  EXPECT_THROW(xq.quantize(x.data(), 0), Error);
  EXPECT_THROW(xq.quantize(x.data(), 32, CpuPath::kScalar, 3), Error);
}

// ---- products ----------------------------------------------------------------------

class QgemvTest : public ::testing::TestWithParam<std::tuple<DType, int64_t>> {};

// 19 rows: the 4-row passes leave 3, and the ranges below start and end
// inside passes.
constexpr int64_t kRowsInTest = 19;

TEST_P(QgemvTest, MatchesTheDoubleProductAndTheScalarPath) {
  const auto [type, k] = GetParam();
  const Matrix m = random_matrix(type, kRowsInTest, k, 10);
  const std::vector<float> x = random_activations(k, 11);
  const std::vector<double> ref = reference_product(m, x);
  for (int terms : {1, 2}) {
    if (terms == 2 && !qgemv_block_type(type)) continue;
    const std::vector<float> scalar = product(CpuPath::kScalar, m, x, 0, kRowsInTest, terms);
    // One 8-bit term: 1e-2, except q6_k, whose 16-element sub-blocks with
    // random signed 8-bit scales cancel more (k = 256: 0.0106, the same on
    // every path, so from the activations' rounding, not a kernel).
    const double one_term = type == DType::kQ6_K ? 2e-2 : 1e-2;
    const double tolerance = !qgemv_block_type(type) ? 1e-5 : terms == 1 ? one_term : 1e-4;
    float scalar_max = 0.0f;
    for (float v : scalar) scalar_max = std::max(scalar_max, std::fabs(v));
    for (CpuPath path : runnable_paths()) {
      SCOPED_TRACE(std::string(cpu_path_name(path)) + ", terms " + std::to_string(terms));
      const std::vector<float> y = product(path, m, x, 0, kRowsInTest, terms);
      EXPECT_LE(normalized_error(y, ref), tolerance);
      for (int64_t r = 0; r < kRowsInTest; ++r) {
        EXPECT_NEAR(y[r], scalar[r], 1e-4 * scalar_max) << "row " << r;
      }
    }
  }
}

TEST_P(QgemvTest, IsExactWhenEveryOperationIsExact) {
  const auto [type, k] = GetParam();
  const Matrix m = random_matrix(type, kRowsInTest, k, 20, /*exact=*/true);
  const std::vector<float> x = random_activations(k, 21, /*exact=*/true);
  const std::vector<double> ref = reference_product(m, x);
  for (CpuPath path : runnable_paths()) {
    // Two terms: the second is all zeros here, but the first is scaled by
    // 256 in the integer sums and back by the unit d/256.
    for (int terms : {1, 2}) {
      SCOPED_TRACE(std::string(cpu_path_name(path)) + ", terms " + std::to_string(terms));
      const std::vector<float> y = product(path, m, x, 0, kRowsInTest, terms);
      for (int64_t r = 0; r < kRowsInTest; ++r) EXPECT_EQ(y[r], ref[r]) << "row " << r;
    }
  }
}

TEST_P(QgemvTest, WritesOnlyItsRowRange) {
  const auto [type, k] = GetParam();
  const Matrix m = random_matrix(type, kRowsInTest, k, 30);
  const std::vector<float> x = random_activations(k, 31);
  for (CpuPath path : runnable_paths()) {
    SCOPED_TRACE(cpu_path_name(path));
    const std::vector<float> all = product(path, m, x, 0, kRowsInTest);
    for (auto [begin, end] : {std::pair<int64_t, int64_t>{3, 14}, {5, 6}, {17, 19}, {7, 7}}) {
      const std::vector<float> part = product(path, m, x, begin, end);
      for (int64_t r = 0; r < kRowsInTest; ++r) {
        if (r >= begin && r < end) {
          EXPECT_EQ(part[r], all[r]) << "row " << r << " of [" << begin << ", " << end << ")";
        } else {
          EXPECT_TRUE(std::isnan(part[r]))
              << "row " << r << " written outside [" << begin << ", " << end << ")";
        }
      }
    }
  }
}

// Every vector of a batch gets gemv's bits, whatever the batch: one and two
// terms alternating (each vector alone in its run), and runs of one term
// count, which the AVX-512 paths take through their many-vector kernels in
// passes of at most 8: 7 then 6, 3, 9 (5 + 4) and 16 (8 + 8).
TEST_P(QgemvTest, BatchEqualsOneProductPerVector) {
  const auto [type, k] = GetParam();
  const Matrix m = random_matrix(type, kRowsInTest, k, 40);
  const int64_t ldy = kRowsInTest + 2;
  const std::vector<std::vector<int>> batches = {
      {1, 2, 1},
      {2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1},
      std::vector<int>(3, 2),
      std::vector<int>(9, 1),
      std::vector<int>(16, 2),
  };
  for (const std::vector<int>& terms : batches) {
    const auto n = static_cast<int64_t>(terms.size());
    SCOPED_TRACE("batch of " + std::to_string(n));
    std::vector<float> xs;
    for (int64_t i = 0; i < n; ++i) {
      const std::vector<float> x = random_activations(k, static_cast<uint32_t>(41 + i));
      xs.insert(xs.end(), x.begin(), x.end());
    }
    for (CpuPath path : runnable_paths()) {
      SCOPED_TRACE(cpu_path_name(path));
      std::vector<Q8Activations> xq(static_cast<size_t>(n));
      if (qgemv_block_type(type)) {
        for (int64_t i = 0; i < n; ++i) xq[i].quantize(xs.data() + i * k, k, path, terms[i]);
      }
      std::vector<float> y(static_cast<size_t>(n * ldy), kNaN);
      gemv_batch(path, type, m.bytes.data(), k, xq.data(), xs.data(), n, y.data(), ldy, 2, 17);
      for (int64_t i = 0; i < n; ++i) {
        const std::vector<float> x(xs.begin() + i * k, xs.begin() + (i + 1) * k);
        const std::vector<float> one = product(path, m, x, 2, 17, terms[i]);
        for (int64_t r = 0; r < ldy; ++r) {
          const float got = y[i * ldy + r];
          if (r >= 2 && r < 17) {
            EXPECT_EQ(got, one[r]) << "vector " << i << " row " << r;
          } else {
            EXPECT_TRUE(std::isnan(got)) << "vector " << i << " row " << r;
          }
        }
      }
    }
  }
}

std::string type_and_k_name(const ::testing::TestParamInfo<std::tuple<DType, int64_t>>& p) {
  return std::string(dtype_name(std::get<0>(p.param))) + "_k" +
         std::to_string(std::get<1>(p.param));
}

// A copy of a matrix that ends exactly where an inaccessible page begins, so
// a kernel reading past the last row (a whole-vector load of a short last
// group) crashes instead of passing unnoticed.
class GuardedCopy {
 public:
  explicit GuardedCopy(const std::vector<uint8_t>& bytes) {
    const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t data_pages = (bytes.size() + page - 1) / page;
    size_ = (data_pages + 1) * page;
    void* p = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::runtime_error("mmap failed");
    base_ = static_cast<uint8_t*>(p);
    if (mprotect(base_ + data_pages * page, page, PROT_NONE) != 0)
      throw std::runtime_error("mprotect failed");
    data_ = base_ + data_pages * page - bytes.size();
    std::memcpy(data_, bytes.data(), bytes.size());
  }
  ~GuardedCopy() { munmap(base_, size_); }
  GuardedCopy(const GuardedCopy&) = delete;
  GuardedCopy& operator=(const GuardedCopy&) = delete;
  const uint8_t* data() const { return data_; }

 private:
  uint8_t* base_ = nullptr;
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

TEST_P(QgemvTest, NeverReadsPastTheLastRow) {
  const auto [type, k] = GetParam();
  const Matrix m = random_matrix(type, kRowsInTest, k, 60);
  const GuardedCopy guarded(m.bytes);
  const std::vector<float> x = random_activations(k, 61);
  for (CpuPath path : runnable_paths()) {
    SCOPED_TRACE(cpu_path_name(path));
    for (int terms : {1, 2}) {
      Q8Activations xq;
      if (qgemv_block_type(type)) xq.quantize(x.data(), k, path, terms);
      std::vector<float> y(static_cast<size_t>(kRowsInTest));
      gemv(path, type, guarded.data(), k, xq, x.data(), y.data(), 0, kRowsInTest);
      const std::vector<float> expected =
          product(path, m, x, 0, kRowsInTest, qgemv_block_type(type) ? terms : 1);
      EXPECT_EQ(y, expected);
      // The many-vector kernels: 8 copies of the vector, the last row for all.
      std::vector<Q8Activations> xqs(8);
      std::vector<float> xs(8 * static_cast<size_t>(k));
      std::vector<float> ys(8 * static_cast<size_t>(kRowsInTest));
      for (int64_t i = 0; i < 8; ++i) {
        std::copy(x.begin(), x.end(), xs.begin() + i * k);
        if (qgemv_block_type(type)) xqs[i].quantize(x.data(), k, path, terms);
      }
      gemv_batch(path, type, guarded.data(), k, xqs.data(), xs.data(), 8, ys.data(), kRowsInTest, 0,
                 kRowsInTest);
      for (int64_t i = 0; i < 8; ++i) {
        EXPECT_EQ(
            std::vector<float>(ys.begin() + i * kRowsInTest, ys.begin() + (i + 1) * kRowsInTest),
            expected)
            << "vector " << i << " of a batch of 8";
      }
    }
  }
}

const DType kTypes[] = {DType::kQ4_0, DType::kQ4_1,   DType::kQ8_0, DType::kQ5_0,
                        DType::kQ5_1, DType::kIQ4_NL, DType::kF32,  DType::kF16};

// k: one block; three (a 4-block group cut short); SmolLM2's hidden and ffn
// sizes (18 = 4*4 + 2 and 48 blocks).
INSTANTIATE_TEST_SUITE_P(QgemvAllTypes, QgemvTest,
                         ::testing::Combine(::testing::ValuesIn(kTypes),
                                            ::testing::Values<int64_t>(32, 96, 576, 1536)),
                         type_and_k_name);

// K-quant rows are whole 256-element super-blocks: one, six (SmolLM2's ffn),
// eight (Llama-3.2-1B's width).
INSTANTIATE_TEST_SUITE_P(QgemvKQuants, QgemvTest,
                         ::testing::Combine(::testing::Values(DType::kQ2_K, DType::kQ3_K,
                                                              DType::kQ4_K, DType::kQ5_K,
                                                              DType::kQ6_K),
                                            ::testing::Values<int64_t>(256, 1536, 2048)),
                         type_and_k_name);

// f32/f16 rows need not be whole blocks: the vector loops end in a partial step.
INSTANTIATE_TEST_SUITE_P(QgemvFloatOddK, QgemvTest,
                         ::testing::Combine(::testing::Values(DType::kF32, DType::kF16),
                                            ::testing::Values<int64_t>(1, 7, 37, 100)),
                         type_and_k_name);

TEST(Qgemv, RejectsTypesWithoutAKernel) {
  const std::vector<uint16_t> w(64);
  const std::vector<float> x(32, 1.0f);
  std::vector<float> y(2);
  Q8Activations xq;
  try {
    gemv(CpuPath::kScalar, DType::kBF16, w.data(), 32, xq, x.data(), y.data(), 0, 2);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInternal);
    EXPECT_NE(std::string(e.what()).find("bf16"), std::string::npos) << e.what();
  }
}

TEST(Qgemv, RejectsActivationsOfAnotherLength) {
  const Matrix m = random_matrix(DType::kQ8_0, 2, 64, 50);
  const std::vector<float> x = random_activations(96, 51);
  Q8Activations xq;
  xq.quantize(x.data(), 96);
  std::vector<float> y(2);
  EXPECT_THROW(
      gemv(CpuPath::kScalar, DType::kQ8_0, m.bytes.data(), 64, xq, nullptr, y.data(), 0, 2), Error);
}

// gemv_batch of several vectors reads their derived forms; vectors
// quantized without them (as the row tiles want them) are refused there and
// multiply alone.
TEST(Qgemv, BatchRefusesVectorsWithoutTheirDerivedForms) {
  const Matrix m = random_matrix(DType::kQ4_1, 4, 64, 53);
  const std::vector<float> x = random_activations(64, 54);
  std::vector<Q8Activations> xq(2);
  for (Q8Activations& v : xq) {
    v.quantize(x.data(), 64, CpuPath::kScalar, 2, /*derived_forms=*/false);
    EXPECT_FALSE(v.has_derived_forms());
  }
  std::vector<float> y(8);
  try {
    gemv_batch(CpuPath::kScalar, DType::kQ4_1, m.bytes.data(), 64, xq.data(), nullptr, 2, y.data(),
               4, 0, 4);
    ADD_FAILURE() << "vectors without derived forms were accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInternal);
  }
  gemv_batch(CpuPath::kScalar, DType::kQ4_1, m.bytes.data(), 64, xq.data(), nullptr, 1, y.data(), 4,
             0, 4);
  const std::vector<double> ref = reference_product(m, x);
  EXPECT_LE(normalized_error({y.begin(), y.begin() + 4}, ref), 1e-4);
  xq[1].quantize(x.data(), 64, CpuPath::kScalar, 2);
  EXPECT_TRUE(xq[1].has_derived_forms());
}

TEST(Qgemv, RejectsAPathBeyondTheCpu) {
  if (hardware_cpu_path() == CpuPath::kAvx512Vnni) GTEST_SKIP() << "every path runs here";
  const Matrix m = random_matrix(DType::kF32, 1, 32, 52);
  const std::vector<float> x = random_activations(32, 53);
  Q8Activations xq;
  std::vector<float> y(1);
  EXPECT_THROW(
      gemv(CpuPath::kAvx512Vnni, DType::kF32, m.bytes.data(), 32, xq, x.data(), y.data(), 0, 1),
      Error);
}

}  // namespace
}  // namespace onednn
}  // namespace duet
