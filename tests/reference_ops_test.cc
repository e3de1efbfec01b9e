// Tests of the reference backend through the real plugin boundary: the test
// dlopens build/plugins/duet-reference.so, calls its entry's create() with a
// registrar that captures the backend factory, and drives the ops through
// core's CheckedOps. Every op is compared with an independent naive
// computation written here (weights are decoded by this file's own ggml
// decoder, not by duet::dequantize_row), for every supported weight dtype.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "capturing_registrar.h"
#include "device_tensor.h"
#include "duet/error.h"
#include "duet/plugin.h"
#include "duet/quant.h"
#include "models/checked_ops.h"
#include "random_floats.h"

namespace duet {

// Lets googletest print a DType parameter by name ("q4_1") in test names.
void PrintTo(DType type, std::ostream* os) { *os << dtype_name(type); }

namespace {

// ---- loading the plugin -------------------------------------------------------

using testing_support::CapturingRegistrar;

struct LoadedPlugin {
  const DuetPluginDescriptor* descriptor = nullptr;
  CapturingRegistrar registrar;
};

// Loads the plugin once per process. It is never unloaded: backends it
// created run its code until the process exits.
const LoadedPlugin& reference_plugin() {
  static const LoadedPlugin* plugin = [] {
    const char* path = DUET_BUILD_DIR "/plugins/duet-reference.so";
    void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) throw std::runtime_error(std::string("dlopen: ") + dlerror());
    auto entry = reinterpret_cast<DuetPluginEntryFn>(dlsym(handle, DUET_PLUGIN_ENTRY_SYMBOL));
    if (entry == nullptr) throw std::runtime_error(std::string("dlsym: ") + dlerror());
    auto* p = new LoadedPlugin;
    p->descriptor = entry();
    char error[512] = {};
    if (p->descriptor->create(&p->registrar, error, sizeof error) != 0) {
      throw std::runtime_error(std::string("create: ") + error);
    }
    return p;
  }();
  return *plugin;
}

std::unique_ptr<Backend> make_backend(const Options& options = Options("backend.options")) {
  return reference_plugin().registrar.backends.at("reference")(options);
}

using testing::DeviceTensor;
using testing::download;
using testing::upload;
using testing::zeros;

using testdata::random_floats;

// ---- this test's own ggml decoder ---------------------------------------------

uint16_t u16_at(const uint8_t* p) { return static_cast<uint16_t>(p[0] | p[1] << 8); }

// Finite binary16 values only, which is all these tests store.
float half_value(uint16_t h) {
  const int exp = (h >> 10) & 0x1F;
  const int mant = h & 0x3FF;
  const double mag = exp == 0 ? std::ldexp(mant, -24) : std::ldexp(1024 + mant, exp - 25);
  return static_cast<float>((h & 0x8000) != 0 ? -mag : mag);
}

std::vector<float> decode_row(DType type, const uint8_t* p, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t b = i / 32, j = i % 32;  // block and index inside it
    const int nibble_byte = static_cast<int>(j % 16);
    const bool high = j >= 16;
    switch (type) {
      case DType::kF32:
        std::memcpy(&out[i], p + 4 * i, 4);
        break;
      case DType::kF16:
        out[i] = half_value(u16_at(p + 2 * i));
        break;
      case DType::kBF16: {
        const uint32_t bits = static_cast<uint32_t>(u16_at(p + 2 * i)) << 16;
        std::memcpy(&out[i], &bits, 4);
        break;
      }
      case DType::kQ4_0: {
        const uint8_t* blk = p + 18 * b;
        const int q = high ? blk[2 + nibble_byte] >> 4 : blk[2 + nibble_byte] & 0xF;
        out[i] = half_value(u16_at(blk)) * static_cast<float>(q - 8);
        break;
      }
      case DType::kQ4_1: {
        const uint8_t* blk = p + 20 * b;
        const int q = high ? blk[4 + nibble_byte] >> 4 : blk[4 + nibble_byte] & 0xF;
        out[i] = half_value(u16_at(blk)) * static_cast<float>(q) + half_value(u16_at(blk + 2));
        break;
      }
      case DType::kQ8_0: {
        const uint8_t* blk = p + 34 * b;
        out[i] = half_value(u16_at(blk)) * static_cast<float>(static_cast<int8_t>(blk[2 + j]));
        break;
      }
      default:
        throw std::logic_error("decode_row: unexpected type");
    }
  }
  return out;
}

// A [rows, cols] weight stored as `type` the way the GGUF writer stores it,
// with what it decodes to.
struct Weight {
  std::vector<uint8_t> bytes;
  std::vector<float> values;  // [rows * cols], decoded by decode_row
};

Weight make_weight(DType type, int64_t rows, int64_t cols, uint32_t seed) {
  const std::vector<float> x = random_floats(static_cast<size_t>(rows * cols), seed);
  const uint64_t row_bytes = *dtype_row_bytes(type, static_cast<uint64_t>(cols));
  Weight w{std::vector<uint8_t>(row_bytes * static_cast<uint64_t>(rows)), {}};
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* dst = w.bytes.data() + row_bytes * static_cast<uint64_t>(r);
    quantize_row(type, x.data() + r * cols, dst, cols);
    const std::vector<float> decoded = decode_row(type, dst, cols);
    w.values.insert(w.values.end(), decoded.begin(), decoded.end());
  }
  return w;
}

constexpr DType kWeightTypes[] = {DType::kF32,  DType::kF16,  DType::kBF16,
                                  DType::kQ4_0, DType::kQ4_1, DType::kQ8_0};

class ReferenceOpsTest : public ::testing::Test {
 protected:
  std::unique_ptr<Backend> backend_ = make_backend();
  Device& device_ = backend_->device();
  CheckedOps ops_{*backend_};
};

class ReferenceWeightTest : public ReferenceOpsTest, public ::testing::WithParamInterface<DType> {};

// ---- the plugin and its backend --------------------------------------------------

TEST(ReferencePlugin, DescriptorAndRegistration) {
  const LoadedPlugin& p = reference_plugin();
  EXPECT_EQ(p.descriptor->struct_size, sizeof(DuetPluginDescriptor));
  EXPECT_EQ(p.descriptor->abi_major, static_cast<uint32_t>(DUET_ABI_MAJOR));
  EXPECT_STREQ(p.descriptor->toolchain, DUET_TOOLCHAIN_TAG);
  EXPECT_STREQ(p.descriptor->name, "reference");
  EXPECT_STREQ(p.descriptor->version, "0.1.0");
  EXPECT_EQ(p.registrar.backends.size(), 1u);
  EXPECT_EQ(p.registrar.backends.count("reference"), 1u);
  EXPECT_TRUE(p.registrar.samplers.empty());
  EXPECT_TRUE(p.registrar.stages.empty());
}

TEST(ReferencePlugin, FactoryRejectsEveryOption) {
  Options options("backend.options");
  options.set("threads", "2");
  try {
    make_backend(options);
    FAIL() << "an option was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kConfig);
    EXPECT_NE(std::string(e.what()).find("threads"), std::string::npos) << e.what();
  }
}

TEST_F(ReferenceOpsTest, BackendNamesItsAttentionAndKVCacheAndRefusesOthers) {
  EXPECT_EQ(backend_->name(), "reference");
  EXPECT_EQ(backend_->attention_impls(), std::vector<std::string>{"full"});
  EXPECT_EQ(backend_->kv_cache_impls(), std::vector<std::string>{"contiguous"});
  try {
    backend_->create_attention("flash", AttentionSpec{});
    FAIL() << "attention created";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kConfig);
    EXPECT_STREQ(e.what(),
                 "backend 'reference' provides no attention implementation named 'flash'; "
                 "available: 'full'");
  }
  EXPECT_FALSE(backend_->check_kv_cache(KVCacheSpec{}).ok());
  EXPECT_THROW(backend_->create_kv_cache(KVCacheSpec{}), Error);
}

// The device is duet::HostDevice on the heap (tests/host_device_test.cc).
TEST_F(ReferenceOpsTest, DeviceIsHostMemory) {
  EXPECT_EQ(device_.name(), "cpu");
  EXPECT_TRUE(device_.host_accessible());
}

TEST_F(ReferenceOpsTest, SupportsListsWeightTypesAndRefusesOthersWithAReason) {
  for (DType t : kWeightTypes) {
    EXPECT_TRUE(ops_.supports({OpKind::kMatmul, t}).ok()) << dtype_name(t);
    EXPECT_TRUE(ops_.supports({OpKind::kEmbedding, t}).ok()) << dtype_name(t);
  }
  const Support no = ops_.supports({OpKind::kMatmul, DType::kI32});
  ASSERT_FALSE(no.ok());
  EXPECT_NE(no.reasons[0].find("i32"), std::string::npos) << no.reasons[0];
  EXPECT_FALSE(ops_.supports({OpKind::kRmsNorm, DType::kF16}).ok());
}

// ---- ops against naive computations ------------------------------------------------

// Tolerance: the reference accumulates in double, so the only error is the
// final rounding to f32; 1e-5 of sum |x * w| also admits f32 accumulation
// over these short rows.
TEST_P(ReferenceWeightTest, MatmulMatchesADoubleLoop) {
  const DType type = GetParam();
  const int64_t n = 3, k = 64, m = 5;
  const Weight w = make_weight(type, m, k, 11);
  const std::vector<float> x = random_floats(static_cast<size_t>(n * k), 12);
  DeviceTensor xt = upload(device_, DType::kF32, {n, k}, x);
  DeviceTensor wt = upload(device_, type, {m, k}, w.bytes);
  DeviceTensor out = zeros(device_, {n, m});
  ops_.matmul(xt.view, wt.view, out.view);
  const std::vector<float> got = download(device_, out.view);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < m; ++j) {
      double want = 0.0, magnitude = 0.0;
      for (int64_t c = 0; c < k; ++c) {
        const double term = static_cast<double>(x[i * k + c]) * w.values[j * k + c];
        want += term;
        magnitude += std::fabs(term);
      }
      EXPECT_NEAR(got[i * m + j], want, 1e-5 * magnitude) << "out[" << i << ", " << j << "]";
    }
  }
}

// Tolerance: decoding is one multiply (and one add for q4_1) per element, so
// the rows match the decoder here to within 1e-6 relative.
TEST_P(ReferenceWeightTest, EmbeddingGathersDecodedRows) {
  const DType type = GetParam();
  const int64_t vocab = 7, dim = 64;
  const Weight table = make_weight(type, vocab, dim, 21);
  const std::vector<int32_t> ids = {3, 0, 6, 3};
  DeviceTensor tt = upload(device_, type, {vocab, dim}, table.bytes);
  DeviceTensor it = upload(device_, DType::kI32, {4}, ids);
  DeviceTensor out = zeros(device_, {4, dim});
  ops_.embedding(tt.view, it.view, out.view);
  const std::vector<float> got = download(device_, out.view);
  for (size_t i = 0; i < ids.size(); ++i) {
    for (int64_t c = 0; c < dim; ++c) {
      const float want = table.values[ids[i] * dim + c];
      EXPECT_NEAR(got[i * dim + c], want, 1e-6 * (1.0 + std::fabs(want)))
          << "row " << i << " column " << c;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllWeightTypes, ReferenceWeightTest, ::testing::ValuesIn(kWeightTypes),
                         [](const ::testing::TestParamInfo<DType>& param) {
                           return std::string(dtype_name(param.param));
                         });

// Tolerance: 2e-6 relative, a few f32 roundings of the double formula.
TEST_F(ReferenceOpsTest, RmsNormMatchesTheFormulaAndRunsInPlace) {
  const int64_t n = 3, d = 48;
  const float eps = 1e-5f;
  std::vector<float> x = random_floats(static_cast<size_t>(n * d), 31, -3.0f, 3.0f);
  const std::vector<float> weight = random_floats(static_cast<size_t>(d), 32, 0.5f, 1.5f);
  DeviceTensor xt = upload(device_, DType::kF32, {n, d}, x);
  DeviceTensor wt = upload(device_, DType::kF32, {d}, weight);
  DeviceTensor out = zeros(device_, {n, d});
  ops_.rmsnorm(xt.view, wt.view, eps, out.view);
  const std::vector<float> got = download(device_, out.view);
  for (int64_t i = 0; i < n; ++i) {
    double sum_sq = 0.0;
    for (int64_t c = 0; c < d; ++c) sum_sq += static_cast<double>(x[i * d + c]) * x[i * d + c];
    const double inv_rms = 1.0 / std::sqrt(sum_sq / static_cast<double>(d) + eps);
    for (int64_t c = 0; c < d; ++c) {
      const double want = x[i * d + c] * inv_rms * weight[c];
      EXPECT_NEAR(got[i * d + c], want, 2e-6 * std::fabs(want) + 1e-7) << i << ", " << c;
    }
  }
  ops_.rmsnorm(xt.view, wt.view, eps, xt.view);
  EXPECT_EQ(download(device_, xt.view), got);
}

// Rotates pair (a, b) of every head as the complex number a + ib times
// e^(i * position * theta^(-2j / head_dim)).
std::vector<float> rope_by_complex_rotation(const std::vector<float>& x,
                                            const std::vector<int32_t>& positions, int64_t heads,
                                            int64_t head_dim, RopeParams p) {
  std::vector<float> y = x;
  for (size_t i = 0; i < positions.size(); ++i) {
    for (int64_t h = 0; h < heads; ++h) {
      float* v = y.data() + (static_cast<int64_t>(i) * heads + h) * head_dim;
      for (int64_t j = 0; j < head_dim / 2; ++j) {
        const int64_t a = p.pairs == RopeParams::Pairs::kAdjacent ? 2 * j : j;
        const int64_t b = p.pairs == RopeParams::Pairs::kAdjacent ? 2 * j + 1 : j + head_dim / 2;
        const double freq = std::pow(static_cast<double>(p.theta_base),
                                     -2.0 * static_cast<double>(j) / static_cast<double>(head_dim));
        const std::complex<double> z =
            std::complex<double>(v[a], v[b]) * std::polar(1.0, positions[i] * freq);
        v[a] = static_cast<float>(z.real());
        v[b] = static_cast<float>(z.imag());
      }
    }
  }
  return y;
}

// Tolerance: 2e-6 of the pair's magnitude; angles are computed in double on
// both sides, so large positions cost no accuracy.
TEST_F(ReferenceOpsTest, RopeMatchesComplexRotationForBothPairings) {
  const int64_t n = 4, heads = 2, head_dim = 8;
  const std::vector<int32_t> positions = {0, 1, 7, 1000};
  const std::vector<float> x = random_floats(static_cast<size_t>(n * heads * head_dim), 41);
  DeviceTensor pt = upload(device_, DType::kI32, {n}, positions);
  std::vector<std::vector<float>> results;
  for (auto pairs : {RopeParams::Pairs::kAdjacent, RopeParams::Pairs::kHalves}) {
    const RopeParams params{10000.0f, pairs};
    DeviceTensor xt = upload(device_, DType::kF32, {n, heads, head_dim}, x);
    ops_.rope(xt.view, pt.view, params);
    const std::vector<float> got = download(device_, xt.view);
    const std::vector<float> want = rope_by_complex_rotation(x, positions, heads, head_dim, params);
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_NEAR(got[i], want[i], 2e-6 * (std::fabs(want[i]) + 1.0)) << "element " << i;
    }
    // Position 0 rotates by angle 0: the identity, exactly.
    for (int64_t i = 0; i < heads * head_dim; ++i) EXPECT_EQ(got[i], x[i]) << "element " << i;
    results.push_back(got);
  }
  EXPECT_NE(results[0], results[1]) << "kAdjacent and kHalves must pair different elements";
}

// Tolerance: 1e-6 relative; the reference evaluates the formula in double.
TEST_F(ReferenceOpsTest, SwiGLUIsElementwiseAndRunsInPlace) {
  const int64_t n = 2, d = 40;
  const std::vector<float> gate = random_floats(static_cast<size_t>(n * d), 51, -30.0f, 30.0f);
  const std::vector<float> up = random_floats(static_cast<size_t>(n * d), 52, -2.0f, 2.0f);
  DeviceTensor gt = upload(device_, DType::kF32, {n, d}, gate);
  DeviceTensor ut = upload(device_, DType::kF32, {n, d}, up);
  DeviceTensor out = zeros(device_, {n, d});
  ops_.swiglu(gt.view, ut.view, out.view);
  const std::vector<float> got = download(device_, out.view);
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = gate[i];
    const double want = g / (1.0 + std::exp(-g)) * up[i];
    EXPECT_NEAR(got[i], want, 1e-6 * std::fabs(want) + 1e-12) << "element " << i;
  }
  ops_.swiglu(gt.view, ut.view, ut.view);  // out aliases up
  EXPECT_EQ(download(device_, ut.view), got);
  ops_.swiglu(gt.view, upload(device_, DType::kF32, {n, d}, up).view, gt.view);  // and gate
  EXPECT_EQ(download(device_, gt.view), got);
}

// Exact: one f32 addition per element.
TEST_F(ReferenceOpsTest, AddIsExactAndRunsInPlace) {
  const std::vector<float> a = random_floats(24, 61), b = random_floats(24, 62);
  DeviceTensor at = upload(device_, DType::kF32, {2, 3, 4}, a);
  DeviceTensor bt = upload(device_, DType::kF32, {2, 3, 4}, b);
  DeviceTensor out = zeros(device_, {2, 3, 4});
  ops_.add(at.view, bt.view, out.view);
  std::vector<float> want(24);
  for (size_t i = 0; i < 24; ++i) want[i] = a[i] + b[i];
  EXPECT_EQ(download(device_, out.view), want);
  ops_.add(at.view, bt.view, at.view);
  EXPECT_EQ(download(device_, at.view), want);
}

// Exact: one f32 addition per element, the bias repeated on every row.
TEST_F(ReferenceOpsTest, AddBiasAddsTheRowToEveryRowInPlace) {
  const std::vector<float> x = random_floats(12, 63), bias = random_floats(4, 64);
  DeviceTensor xt = upload(device_, DType::kF32, {3, 4}, x);
  DeviceTensor bt = upload(device_, DType::kF32, {4}, bias);
  std::vector<float> want(12);
  for (size_t i = 0; i < 12; ++i) want[i] = x[i] + bias[i % 4];
  ops_.add_bias(xt.view, bt.view, xt.view);
  EXPECT_EQ(download(device_, xt.view), want);
}

// GELU's tanh form at points whose values were computed independently
// (Python: 0.5*x*(1+math.tanh(math.sqrt(2/math.pi)*(x+0.044715*x**3)))),
// times up; 1e-7 relative.
TEST_F(ReferenceOpsTest, GeGLUIsTheTanhFormOfGeluTimesUp) {
  const std::vector<float> gate = {0.0f, 1.0f, -1.0f, 2.0f, -3.0f, 10.0f, -12.0f};
  const std::vector<double> gelu = {0.0,
                                    0.8411919906082768,
                                    -0.15880800939172324,
                                    1.954597694087775,
                                    -0.0036373920817729943,
                                    10.0,
                                    -0.0};
  const std::vector<float> up = {1.5f, 2.0f, -1.0f, 0.5f, 3.0f, 1.0f, 2.0f};
  const int64_t n = static_cast<int64_t>(gate.size());
  DeviceTensor gt = upload(device_, DType::kF32, {n}, gate);
  DeviceTensor ut = upload(device_, DType::kF32, {n}, up);
  ops_.geglu(gt.view, ut.view, gt.view);
  const std::vector<float> got = download(device_, gt.view);
  for (size_t i = 0; i < got.size(); ++i) {
    const double want = gelu[i] * up[i];
    EXPECT_NEAR(got[i], want, 1e-7 * std::fabs(want) + 1e-12) << "gate " << gate[i];
  }
}

TEST_F(ReferenceOpsTest, ScaleMultipliesEveryElement) {
  const std::vector<float> x = random_floats(10, 65);
  DeviceTensor xt = upload(device_, DType::kF32, {2, 5}, x);
  std::vector<float> want(10);
  for (size_t i = 0; i < 10; ++i) want[i] = x[i] * 25.298221f;
  ops_.scale(xt.view, 25.298221f, xt.view);
  EXPECT_EQ(download(device_, xt.view), want);
}

// A backend of an ABI 1.1 plugin has no slot for the ops ABI 1.2 appended:
// CheckedOps says so and never calls them.
TEST_F(ReferenceOpsTest, OpsOfANewerAbiAreRefusedOnAnOlderBackend) {
  CheckedOps old(*backend_, 1);
  for (OpKind kind : {OpKind::kAddBias, OpKind::kGeGLU, OpKind::kScale}) {
    const Support s = old.supports(OpDesc{kind});
    ASSERT_FALSE(s.ok()) << op_kind_name(kind);
    EXPECT_NE(s.reasons.front().find("built against Duet ABI 1.1"), std::string::npos)
        << s.reasons.front();
    EXPECT_TRUE(ops_.supports(OpDesc{kind}).ok()) << op_kind_name(kind);
  }
  DeviceTensor xt = upload(device_, DType::kF32, {4}, random_floats(4, 66));
  EXPECT_THROW(old.scale(xt.view, 2.0f, xt.view), Error);
  EXPECT_TRUE(old.supports(OpDesc{OpKind::kAdd}).ok());
}

// ---- CheckedOps rejects what the contracts forbid ------------------------------------

// Runs `fn`, expecting duet::Error of `kind` whose message contains every
// string in `parts`.
template <typename Fn>
void expect_error(Fn fn, ErrorKind kind, std::initializer_list<const char*> parts) {
  try {
    fn();
    ADD_FAILURE() << "no error thrown";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    for (const char* part : parts) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
          << "'" << part << "' missing from: " << e.what();
    }
  }
}

TEST_F(ReferenceOpsTest, CheckedMatmulNamesBothShapesOnMismatch) {
  DeviceTensor x = zeros(device_, {3, 64});
  DeviceTensor w = zeros(device_, {5, 32});
  DeviceTensor out = zeros(device_, {3, 5});
  expect_error([&] { ops_.matmul(x.view, w.view, out.view); }, ErrorKind::kInternal,
               {"matmul: w has 32 columns but x has 64", "x [3, 64]", "w [5, 32]"});
}

TEST_F(ReferenceOpsTest, CheckedOpsRejectBrokenContracts) {
  DeviceTensor x = zeros(device_, {3, 64});
  DeviceTensor w = zeros(device_, {5, 64});
  DeviceTensor out = zeros(device_, {3, 5});

  TensorView w_i32 = w.view;
  w_i32.dtype = DType::kI32;
  expect_error([&] { ops_.matmul(x.view, w_i32, out.view); }, ErrorKind::kPlugin,
               {"backend 'reference'", "i32"});

  TensorView w_q4 = w.view;  // 48 columns are not whole 32-element blocks
  w_q4.dtype = DType::kQ4_0;
  w_q4.shape = {5, 48};
  TensorView x48 = x.view;
  x48.shape = {3, 48};
  expect_error([&] { ops_.matmul(x48, w_q4, out.view); }, ErrorKind::kInternal,
               {"block size 32", "[5, 48]"});

  TensorView out_in_x = x.view;  // out overlapping x
  out_in_x.shape = {3, 5};
  expect_error([&] { ops_.matmul(x.view, w.view, out_in_x); }, ErrorKind::kInternal,
               {"out overlaps x"});

  TensorView x_f16 = x.view;
  x_f16.dtype = DType::kF16;
  expect_error([&] { ops_.matmul(x_f16, w.view, out.view); }, ErrorKind::kInternal,
               {"x must be f32 but is f16"});

  DeviceTensor weight2d = zeros(device_, {1, 64});
  expect_error([&] { ops_.rmsnorm(x.view, weight2d.view, 1e-5f, x.view); }, ErrorKind::kInternal,
               {"rmsnorm: weight must have rank 1", "[1, 64]"});

  DeviceTensor odd = zeros(device_, {2, 1, 5});
  DeviceTensor pos = upload(device_, DType::kI32, {2}, std::vector<int32_t>{0, 1});
  expect_error([&] { ops_.rope(odd.view, pos.view, RopeParams{}); }, ErrorKind::kInternal,
               {"head_dim 5"});
}

// Ops::matmuls (ABI 1.8): each pair checked as matmul() would check it,
// named by its index; outputs apart from each other and from every matrix;
// on a backend built before 1.8, matmul() for each pair, the same values.
TEST_F(ReferenceOpsTest, CheckedMatmulsNameTheBrokenPairAndRunOnAnOlderBackend) {
  DeviceTensor x = upload(device_, DType::kF32, {3, 64}, random_floats(3 * 64, 72));
  const Weight a = make_weight(DType::kQ4_0, 5, 64, 73);
  const Weight b = make_weight(DType::kQ8_0, 7, 64, 74);
  DeviceTensor wa = upload(device_, DType::kQ4_0, {5, 64}, a.bytes);
  DeviceTensor wb = upload(device_, DType::kQ8_0, {7, 64}, b.bytes);
  DeviceTensor out = zeros(device_, {3 * 5 + 3 * 7});
  const TensorView oa{out.view.data, DType::kF32, {3, 5}};
  const TensorView ob{out.view.as<float>() + 15, DType::kF32, {3, 7}};
  const TensorView w[] = {wa.view, wb.view};
  const TensorView o[] = {oa, ob};
  ops_.matmuls(x.view, w, o);
  const std::vector<float> together = download(device_, out.view);
  DeviceTensor each = zeros(device_, {3 * 5 + 3 * 7});
  ops_.matmul(x.view, wa.view, TensorView{each.view.data, DType::kF32, {3, 5}});
  ops_.matmul(x.view, wb.view, TensorView{each.view.as<float>() + 15, DType::kF32, {3, 7}});
  EXPECT_EQ(together, download(device_, each.view));
  CheckedOps old(*backend_, 7);
  DeviceTensor out7 = zeros(device_, {3 * 5 + 3 * 7});
  const TensorView o7[] = {TensorView{out7.view.data, DType::kF32, {3, 5}},
                           TensorView{out7.view.as<float>() + 15, DType::kF32, {3, 7}}};
  old.matmuls(x.view, w, o7);
  EXPECT_EQ(download(device_, out7.view), together);

  const TensorView one_out[] = {oa};
  expect_error([&] { ops_.matmuls(x.view, w, one_out); }, ErrorKind::kInternal,
               {"2 weight matrices but 1 outputs"});
  const TensorView wrong_rows[] = {oa, TensorView{ob.data, DType::kF32, {3, 6}}};
  expect_error([&] { ops_.matmuls(x.view, w, wrong_rows); }, ErrorKind::kInternal,
               {"out[1] has 6 columns but w[1] has 7 rows"});
  const TensorView overlapping[] = {oa, TensorView{out.view.as<float>() + 10, DType::kF32, {3, 7}}};
  expect_error([&] { ops_.matmuls(x.view, w, overlapping); }, ErrorKind::kInternal,
               {"out[1] overlaps out[0]"});
}

TEST_F(ReferenceOpsTest, CheckedOpsAllowOnlyExactAliases) {
  DeviceTensor buf = zeros(device_, {9});
  TensorView a{buf.view.data, DType::kF32, {8}};
  TensorView shifted{buf.view.as<float>() + 1, DType::kF32, {8}};
  DeviceTensor b = zeros(device_, {8});
  EXPECT_NO_THROW(ops_.add(a, b.view, a));
  expect_error([&] { ops_.add(a, b.view, shifted); }, ErrorKind::kInternal,
               {"add: out partly overlaps a"});
}

TEST_F(ReferenceOpsTest, CheckedEmbeddingRejectsIdsOutsideTheTable) {
  const Weight table = make_weight(DType::kQ8_0, 7, 32, 71);
  DeviceTensor tt = upload(device_, DType::kQ8_0, {7, 32}, table.bytes);
  DeviceTensor ids = upload(device_, DType::kI32, {2}, std::vector<int32_t>{1, 7});
  DeviceTensor out = zeros(device_, {2, 32});
  expect_error([&] { ops_.embedding(tt.view, ids.view, out.view); }, ErrorKind::kInternal,
               {"ids[1] is 7", "[0, 7)"});
}

}  // namespace
}  // namespace duet
