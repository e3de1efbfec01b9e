// Every op of duet::Ops and every attention step of a backend against the
// reference backend, on random inputs, in the spirit of llama.cpp's
// test-backend-ops. Both backends are loaded through the plugin host from
// the build tree and driven through core's CheckedOps, exactly as the model
// drives them; each comparison prints its normalised MSE
//   nmse = Σ (backend - reference)² / Σ reference²
// next to the threshold it must stay under.
//
// Thresholds, and why:
//   1e-10  elementwise f32 ops, embedding and attention: only float rounding
//          differs (the reference accumulates in double). Attention runs
//          over an f32 and an f16 cache, fed keys and values that f16
//          holds exactly, against the reference's f32 cache;
//   1e-8   matmul with f32, f16 or bf16 weights: f32 accumulation over k;
//          with q4_0, q4_1 or q8_0 weights, stated per backend case: many
//          rows are expanded to f32 (1e-13), few rows go through kernels
//          that take activations as 8-bit blocks of 32 — two 8-bit terms
//          by default in onednn (~2e-10), one term with its
//          gemv_activations: q8, which costs a relative error of up to 1/254
//          of each block's largest magnitude (~1.3e-5 here): 1e-4.
//   1e-6   matmul with quantized weights and many rows, on a backend that
//          multiplies them on f16 tensor cores (cuda from 9 rows on: weights
//          expanded to f16, activations rounded to f16, f32 accumulation,
//          backends/cuda/gemm.h). Rounding x to f16 alone costs a relative
//          error of up to 2^-11 per element, an nmse of ~1e-7 on a product
//          of random signs; measured on an H200 on 2026-12-01: 5.5e-8 to
//          6.8e-8 for q4_0, q4_1 and q8_0 at n = 7 and 64 (when 7 rows still
//          went to cuBLAS), and on the SmolLM2 shapes. Fewer rows (decode
//          steps of a few sequences) keep the backend's f32 bound.
// These bounds are each backend's precision contract, listed in
// docs/plugins.md ("Precision contract") for plugin authors.
//
// The suite is parameterised over backend cases, so another backend (cuda)
// is one more entry in kCases; a case whose plugin is refused by its probe
// is skipped with the refusal.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "device_tensor.h"
#include "duet/app/plugin_host.h"
#include "duet/error.h"
#include "duet/quant.h"
#include "models/checked_ops.h"
#include "random_floats.h"
#include "random_weight.h"

namespace duet {
namespace {

// ---- the backends under test ------------------------------------------------

struct BackendCase {
  std::string label;                               // test-name suffix
  std::string plugin;                              // plugin and backend name
  std::map<std::string, std::string> options;      // backend.options
  std::map<std::string, std::string> environment;  // set while the plugin registers
  double quantized_matmul = 1e-8;                  // threshold for q4_0, q4_1, q8_0 weights
  // The same for gemm_rows or more rows of activations; 0: quantized_matmul's.
  double quantized_matmul_rows = 0;
  int64_t gemm_rows = 2;

  double quantized_threshold(int64_t rows) const {
    return rows >= gemm_rows && quantized_matmul_rows > 0 ? quantized_matmul_rows
                                                          : quantized_matmul;
  }
};

void PrintTo(const BackendCase& c, std::ostream* os) { *os << c.label; }

const BackendCase kCases[] = {
    {"onednn", "onednn", {}, {}},
    // Every matmul through oneDNN GEMM, whatever its row count.
    {"onednn_gemm", "onednn", {{"matmul_min_rows", "1"}}, {}},
    // Products of several rows through the gemv kernels instead of the row
    // tiles the AVX-512 VNNI path takes by default.
    {"onednn_no_tiles", "onednn", {{"row_tiles_min_rows", "0"}}, {}},
    // Row tiles on AVX-512 VNNI only, where the CPU has AMX (the default
    // then multiplies 12 rows or more on the tile unit).
    {"onednn_no_amx", "onednn", {{"amx", "off"}}, {}},
    // The tile unit's int8 products at every row count, where the default
    // takes its bf16 products from 64 rows (CPUs with AMX-BF16).
    {"onednn_amx_int8", "onednn", {{"amx", "int8"}}, {}},
    // More threads than this machine may have: split decode attention.
    {"onednn_4threads", "onednn", {{"threads", "4"}}, {}},
    // Every row like a decode row, stretches at fixed positions.
    {"onednn_batch_invariant", "onednn", {{"batch_invariant", "true"}}, {}},
    // An f16 cache in slot rows, where the AVX-512 paths keep it in tiles
    // by default.
    {"onednn_f16_rows", "onednn", {{"f16_cache_tiles", "false"}}, {}},
    // The portable and AVX2 paths (lowered to what the CPU has).
    {"onednn_scalar", "onednn", {}, {{"DUET_CPU_PATH", "scalar"}}},
    {"onednn_avx2", "onednn", {}, {{"DUET_CPU_PATH", "avx2"}}},
    {"onednn_avx2_no_tiles", "onednn", {{"row_tiles_min_rows", "0"}}, {{"DUET_CPU_PATH", "avx2"}}},
    // Activations as one 8-bit term, like llama.cpp.
    {"onednn_q8", "onednn", {{"gemv_activations", "q8"}}, {}, 1e-4},
    // Products of 9 or more rows of quantized weights on f16 tensor cores
    // (see above); fewer rows through the f32 gemv, as decode.
    {"cuda", "cuda", {}, {}, 1e-8, 1e-6, 9},
    // Prompt chunks attending in tiles of 32 rows (off by default).
    {"cuda_tiled", "cuda", {{"tiled_attention", "true"}}, {}, 1e-8, 1e-6, 9},
    // Every row through the gemv, attention of one shape.
    {"cuda_batch_invariant", "cuda", {{"batch_invariant", "true"}}, {}},
};

constexpr double kElementwise = 1e-10;
constexpr double kFloatMatmul = 1e-8;
// Attention over a q8_0 cache may be integer arithmetic: keys times the
// queries in two int8 terms (about 16 bits) and values times probabilities
// rounded to 15 bits (the onednn backend's tiles on VNNI CPUs).
constexpr double kInt8Cache = 1e-8;

double nmse(const std::vector<float>& got, const std::vector<float>& want) {
  EXPECT_EQ(got.size(), want.size());
  double err = 0.0, ref = 0.0;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    err += (double{got[i]} - want[i]) * (double{got[i]} - want[i]);
    ref += double{want[i]} * want[i];
  }
  return ref == 0.0 ? err : err / ref;
}

using testing::DeviceTensor;
using testing::download;
using testing::random_k_quant_weight;
using testing::random_weight;
using testing::upload;
using testing::zeros;

using testdata::random_floats;

// Every weight type quantize_row writes (the K-quants have their own case).
constexpr DType kWeightTypes[] = {DType::kF32,  DType::kF16,  DType::kBF16,
                                  DType::kQ4_0, DType::kQ4_1, DType::kQ5_0,
                                  DType::kQ5_1, DType::kQ8_0, DType::kIQ4_NL};

// ---- the fixture ----------------------------------------------------------------

class BackendConformance : public ::testing::TestWithParam<BackendCase> {
 protected:
  void SetUp() override {
    const BackendCase& c = GetParam();
    const std::string dir = DUET_BUILD_DIR "/plugins/";
    PluginRecord ref = host_.load(dir + "duet-reference.so");
    ASSERT_TRUE(ref.loaded) << ref.refusal;
    std::map<std::string, std::string> saved;
    for (const auto& [name, value] : c.environment) {
      if (const char* old = std::getenv(name.c_str())) saved[name] = old;
      setenv(name.c_str(), value.c_str(), 1);
    }
    PluginRecord dut = host_.load(dir + "duet-" + c.plugin + ".so");
    for (const auto& [name, value] : c.environment) {
      if (saved.count(name) != 0) {
        setenv(name.c_str(), saved[name].c_str(), 1);
      } else {
        unsetenv(name.c_str());
      }
    }
    if (!dut.loaded) GTEST_SKIP() << "plugin '" << c.plugin << "' refused: " << dut.refusal;
    Options options("backend.options");
    for (const auto& [key, value] : c.options) options.set(key, value);
    reference_ = host_.create_backend("reference", Options("backend.options"));
    backend_ = host_.create_backend(c.plugin, options);
  }

  // Runs `fn(backend)` on the reference and on the backend under test and
  // checks the normalised MSE of the two results against `threshold`.
  template <typename Fn>
  void compare(const std::string& what, double threshold, const Fn& fn) {
    const std::vector<float> want = fn(*reference_);
    const std::vector<float> got = fn(*backend_);
    const double e = nmse(got, want);
    std::printf("  %-16s %-48s nmse %9.3g  (threshold %.0e)\n", GetParam().label.c_str(),
                what.c_str(), e, threshold);
    EXPECT_LE(e, threshold) << what;
  }

  // Whether the backend under test reads weights of `type`; when it does
  // not, prints its reason (a backend without a kernel for a format says so
  // in supports()).
  bool reads(DType type) {
    const Support s = backend_->ops().supports({OpKind::kMatmul, type});
    if (!s.ok()) {
      std::printf("  %-16s %-48s not supported: %s\n", GetParam().label.c_str(),
                  dtype_name(type).data(), s.reasons.front().c_str());
    }
    return s.ok();
  }

  // Steps of one sequence, each seeing the earlier ones through the cache
  // (its last `window` positions when window > 0), against the reference,
  // for every attention the backend provides. Skips when the backend cannot
  // store `dtype`, or run the window, saying why.
  void check_attention(const std::string& layout, int32_t block_tokens,
                       const std::vector<int32_t>& table, DType dtype, int32_t window = 0);
  void check_attention_impl(const std::string& impl, const std::string& layout,
                            int32_t block_tokens, const std::vector<int32_t>& table, DType dtype,
                            int32_t window);

  PluginHost host_;
  std::shared_ptr<Backend> reference_;
  std::shared_ptr<Backend> backend_;
};

TEST_P(BackendConformance, EmbeddingOfEveryWeightType) {
  const int64_t vocab = 100, dim = 96;
  const std::vector<int32_t> ids = {3, 0, 99, 42, 42, 7, 64};
  for (DType type : kWeightTypes) {
    if (!reads(type)) continue;
    const std::vector<uint8_t> table = random_weight(type, vocab, dim, 11);
    compare("embedding " + std::string(dtype_name(type)), kElementwise, [&](Backend& b) {
      DeviceTensor t = upload(b.device(), type, {vocab, dim}, table);
      DeviceTensor i = upload(b.device(), DType::kI32, {static_cast<int64_t>(ids.size())}, ids);
      DeviceTensor out = zeros(b.device(), {static_cast<int64_t>(ids.size()), dim});
      CheckedOps(b).embedding(t.view, i.view, out.view);
      return download(b.device(), out.view);
    });
  }
}

TEST_P(BackendConformance, MatmulOfEveryWeightTypeAndRowCount) {
  // m is not a multiple of 16 or of the thread count, so row ranges end unevenly.
  const int64_t m = 200, k = 320;
  for (DType type : kWeightTypes) {
    if (!reads(type)) continue;
    const std::vector<uint8_t> w = random_weight(type, m, k, 21);
    for (int64_t n : {1, 7, 64}) {
      const std::vector<float> x = random_floats(static_cast<size_t>(n * k), 22);
      compare("matmul " + std::string(dtype_name(type)) + " n=" + std::to_string(n),
              is_block_quantized(type) ? GetParam().quantized_threshold(n) : kFloatMatmul,
              [&](Backend& b) {
                DeviceTensor wt = upload(b.device(), type, {m, k}, w);
                DeviceTensor xt = upload(b.device(), DType::kF32, {n, k}, x);
                DeviceTensor out = zeros(b.device(), {n, m});
                CheckedOps(b).matmul(xt.view, wt.view, out.view);
                return download(b.device(), out.view);
              });
    }
  }
}

// The K-quants, whose rows are whole 256-element super-blocks.
TEST_P(BackendConformance, EmbeddingAndMatmulOfEveryKQuant) {
  const int64_t m = 200, k = 512;
  const std::vector<int32_t> ids = {3, 0, 199, 42, 42, 7};
  for (DType type : {DType::kQ2_K, DType::kQ3_K, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K}) {
    if (!reads(type)) continue;
    const std::vector<uint8_t> w = random_k_quant_weight(type, m, k, 31);
    compare("embedding " + std::string(dtype_name(type)), kElementwise, [&](Backend& b) {
      DeviceTensor t = upload(b.device(), type, {m, k}, w);
      DeviceTensor i = upload(b.device(), DType::kI32, {static_cast<int64_t>(ids.size())}, ids);
      DeviceTensor out = zeros(b.device(), {static_cast<int64_t>(ids.size()), k});
      CheckedOps(b).embedding(t.view, i.view, out.view);
      return download(b.device(), out.view);
    });
    for (int64_t n : {1, 7, 64}) {
      const std::vector<float> x = random_floats(static_cast<size_t>(n * k), 32);
      compare("matmul " + std::string(dtype_name(type)) + " n=" + std::to_string(n),
              GetParam().quantized_threshold(n), [&](Backend& b) {
                DeviceTensor wt = upload(b.device(), type, {m, k}, w);
                DeviceTensor xt = upload(b.device(), DType::kF32, {n, k}, x);
                DeviceTensor out = zeros(b.device(), {n, m});
                CheckedOps(b).matmul(xt.view, wt.view, out.view);
                return download(b.device(), out.view);
              });
    }
  }
}

TEST_P(BackendConformance, MatmulOfSmolLM2Shapes) {
  // The projections of SmolLM2-135M in its file's types: long rows (k = 1536)
  // and more rows than one GEMM panel holds.
  struct Case {
    DType type;
    int64_t m, k;
  };
  for (const Case& c : {Case{DType::kQ4_1, 576, 576}, Case{DType::kQ4_1, 1536, 576},
                        Case{DType::kQ4_1, 576, 1536}, Case{DType::kQ8_0, 4096, 576}}) {
    const std::vector<uint8_t> w = random_weight(c.type, c.m, c.k, 23);
    for (int64_t n : {1, 7, 64}) {
      const std::vector<float> x = random_floats(static_cast<size_t>(n * c.k), 24);
      compare("matmul " + std::string(dtype_name(c.type)) + " " + std::to_string(c.m) + "x" +
                  std::to_string(c.k) + " n=" + std::to_string(n),
              GetParam().quantized_threshold(n), [&](Backend& b) {
                DeviceTensor wt = upload(b.device(), c.type, {c.m, c.k}, w);
                DeviceTensor xt = upload(b.device(), DType::kF32, {n, c.k}, x);
                DeviceTensor out = zeros(b.device(), {n, c.m});
                CheckedOps(b).matmul(xt.view, wt.view, out.view);
                return download(b.device(), out.view);
              });
    }
  }
}

TEST_P(BackendConformance, MatmulsSharingAnInputSeeItsNewValues) {
  // The model multiplies one activation buffer by several matrices in a row
  // (q, k, v), then writes new values to it; a backend that keeps work on
  // the input between calls must notice. Rows of one-row and few-row steps.
  const int64_t m = 64, k = 256;
  const std::vector<uint8_t> w1 = random_weight(DType::kQ4_1, m, k, 25);
  const std::vector<uint8_t> w2 = random_weight(DType::kQ8_0, m, k, 26);
  for (int64_t n : {1, 3}) {
    const std::vector<float> x1 = random_floats(static_cast<size_t>(n * k), 27);
    std::vector<float> x2 = x1;
    x2[static_cast<size_t>(n * k - 1)] += 1.0f;  // one value differs, the last
    compare("matmul, input rewritten in place n=" + std::to_string(n),
            GetParam().quantized_threshold(n), [&](Backend& b) {
              DeviceTensor a = upload(b.device(), DType::kQ4_1, {m, k}, w1);
              DeviceTensor c = upload(b.device(), DType::kQ8_0, {m, k}, w2);
              DeviceTensor xt = upload(b.device(), DType::kF32, {n, k}, x1);
              DeviceTensor out = zeros(b.device(), {4, n, m});
              const int64_t part = n * m * static_cast<int64_t>(sizeof(float));
              auto slice = [&](int64_t i) {
                return TensorView{
                    static_cast<uint8_t*>(out.buffer->data()) + i * part, DType::kF32, {n, m}};
              };
              CheckedOps ops(b);
              ops.matmul(xt.view, a.view, slice(0));
              ops.matmul(xt.view, c.view, slice(1));
              b.device().copy_from_host(xt.buffer->data(), x2.data(), x2.size() * sizeof(float));
              ops.matmul(xt.view, a.view, slice(2));
              ops.matmul(xt.view, c.view, slice(3));
              return download(b.device(), out.view);
            });
  }
}

// Row counts of a decode batch and of a prompt chunk (which a backend may
// split across threads), for the row-wise ops below.
constexpr int64_t kFewRows = 7, kPromptRows = 203;

TEST_P(BackendConformance, RmsNorm) {
  const int64_t d = 576;
  for (int64_t n : {kFewRows, kPromptRows}) {
    const std::vector<float> x = random_floats(static_cast<size_t>(n * d), 31, -3.0f, 3.0f);
    const std::vector<float> weight = random_floats(static_cast<size_t>(d), 32);
    compare("rmsnorm n=" + std::to_string(n), kElementwise, [&](Backend& b) {
      DeviceTensor xt = upload(b.device(), DType::kF32, {n, d}, x);
      DeviceTensor wt = upload(b.device(), DType::kF32, {d}, weight);
      CheckedOps(b).rmsnorm(xt.view, wt.view, 1e-5f, xt.view);  // in place, as the model calls it
      return download(b.device(), xt.view);
    });
  }
}

TEST_P(BackendConformance, RopeWithBothPairings) {
  const int64_t head_dim = 64;
  // Few rows at scattered positions; a prompt's rows of all 9 query heads.
  for (int64_t n : {kFewRows, kPromptRows}) {
    const int64_t heads = n == kFewRows ? 3 : 9;
    const std::vector<float> x = random_floats(static_cast<size_t>(n * heads * head_dim), 41);
    std::vector<int32_t> positions = {0, 1, 2, 17, 600, 2047, 4000};
    if (n != kFewRows) {
      positions.clear();
      for (int64_t i = 0; i < n; ++i) positions.push_back(static_cast<int32_t>(20 * i));
    }
    for (auto pairs : {RopeParams::Pairs::kAdjacent, RopeParams::Pairs::kHalves}) {
      const RopeParams params{100000.0f, pairs};
      compare(std::string(pairs == RopeParams::Pairs::kAdjacent ? "rope adjacent" : "rope halves") +
                  " n=" + std::to_string(n),
              kElementwise, [&](Backend& b) {
                DeviceTensor xt = upload(b.device(), DType::kF32, {n, heads, head_dim}, x);
                DeviceTensor pt = upload(b.device(), DType::kI32, {n}, positions);
                CheckedOps(b).rope(xt.view, pt.view, params);
                return download(b.device(), xt.view);
              });
    }
  }
}

// Llama 3.1+'s RoPE frequency factors, with both pairings, and a rope
// without factors between two with them (a backend caching its tables must
// not mix them up).
TEST_P(BackendConformance, RopeWithFrequencyFactors) {
  const int64_t head_dim = 64, heads = 4, n = kPromptRows;
  const std::vector<float> x = random_floats(static_cast<size_t>(n * heads * head_dim), 43);
  const std::vector<float> factors =
      random_floats(static_cast<size_t>(head_dim / 2), 44, 1.0f, 8.0f);
  std::vector<int32_t> positions;
  for (int64_t i = 0; i < n; ++i) positions.push_back(static_cast<int32_t>(37 * i));
  for (auto pairs : {RopeParams::Pairs::kAdjacent, RopeParams::Pairs::kHalves}) {
    compare(std::string("rope factors ") +
                (pairs == RopeParams::Pairs::kAdjacent ? "adjacent" : "halves"),
            kElementwise, [&](Backend& b) {
              DeviceTensor ft = upload(b.device(), DType::kF32, {head_dim / 2}, factors);
              DeviceTensor pt = upload(b.device(), DType::kI32, {n}, positions);
              std::vector<float> out;
              for (bool with : {true, false, true}) {
                DeviceTensor xt = upload(b.device(), DType::kF32, {n, heads, head_dim}, x);
                RopeParams params{500000.0f, pairs};
                if (with) params.freq_factors = ft.view;
                CheckedOps(b).rope(xt.view, pt.view, params);
                const std::vector<float> got = download(b.device(), xt.view);
                out.insert(out.end(), got.begin(), got.end());
              }
              return out;
            });
  }
}

TEST_P(BackendConformance, SwiGLUSmallAndLarge) {
  // 7 x 1536 runs on one thread; 64 x 1536 is split across the pool. The
  // odd count leaves a tail shorter than a vector.
  for (int64_t n : {7 * 1536 + 5, 64 * 1536}) {
    const std::vector<float> gate = random_floats(static_cast<size_t>(n), 51, -12.0f, 12.0f);
    const std::vector<float> up = random_floats(static_cast<size_t>(n), 52);
    compare("swiglu " + std::to_string(n), kElementwise, [&](Backend& b) {
      DeviceTensor g = upload(b.device(), DType::kF32, {n}, gate);
      DeviceTensor u = upload(b.device(), DType::kF32, {n}, up);
      CheckedOps(b).swiglu(g.view, u.view, g.view);
      return download(b.device(), g.view);
    });
  }
}

// Ops::matmuls (ABI 1.8), as the model calls it for a layer's q, k and v:
// every output bit for bit what matmul() gives it alone, on the row counts
// of decode, batches (the AMX tiles from 12 rows) and prompts; one set of
// a single format (onednn takes its tiles in one loop from one row), one
// that mixes it with q8_0 (one row: gemv beside tiles), both against the
// reference too.
TEST_P(BackendConformance, MatmulsOfOneInputEqualEachMatmulAlone) {
  const int64_t k = 576;
  struct Matrix {
    DType type;
    int64_t m;
  };
  const std::vector<std::vector<Matrix>> sets = {
      {{DType::kQ4_1, 576}, {DType::kQ4_1, 192}, {DType::kQ4_1, 192}},
      {{DType::kQ4_1, 200}, {DType::kQ8_0, 96}}};
  for (size_t set = 0; set < sets.size(); ++set) {
    const std::vector<Matrix>& mats = sets[set];
    std::vector<std::vector<uint8_t>> bytes;
    int64_t cols = 0;  // the outputs' columns, all matrices together
    for (const Matrix& mat : mats) {
      bytes.push_back(random_weight(mat.type, mat.m, k, 41 + static_cast<uint32_t>(bytes.size())));
      cols += mat.m;
    }
    for (int64_t n : {1, 7, 16, 64}) {
      const std::vector<float> x = random_floats(static_cast<size_t>(n * k), 45);
      // out: the products of matmuls(), then the same of matmul() alone.
      auto run = [&](Backend& b) {
        std::vector<DeviceTensor> w;
        for (size_t i = 0; i < mats.size(); ++i) {
          w.push_back(upload(b.device(), mats[i].type, {mats[i].m, k}, bytes[i]));
        }
        DeviceTensor xt = upload(b.device(), DType::kF32, {n, k}, x);
        DeviceTensor out = zeros(b.device(), {2, n * cols});
        std::vector<TensorView> wv, together, alone;
        int64_t at = 0;
        for (size_t i = 0; i < mats.size(); ++i) {
          wv.push_back(w[i].view);
          together.push_back(TensorView{out.view.as<float>() + at, DType::kF32, {n, mats[i].m}});
          alone.push_back(
              TensorView{out.view.as<float>() + n * cols + at, DType::kF32, {n, mats[i].m}});
          at += n * mats[i].m;
        }
        CheckedOps ops(b);
        ops.matmuls(xt.view, wv, together);
        for (size_t i = 0; i < mats.size(); ++i) ops.matmul(xt.view, wv[i], alone[i]);
        return download(b.device(), out.view);
      };
      const std::vector<float> got = run(*backend_);
      const auto half = static_cast<std::ptrdiff_t>(got.size() / 2);
      EXPECT_TRUE(std::equal(got.begin(), got.begin() + half, got.begin() + half))
          << "set " << set << ", n " << n << ": matmuls differs from matmul alone";
      compare("matmuls set " + std::to_string(set) + " n=" + std::to_string(n),
              GetParam().quantized_threshold(n), run);
    }
  }
}

TEST_P(BackendConformance, Add) {
  const int64_t d = 576;
  for (int64_t n : {kFewRows, kPromptRows}) {
    const std::vector<float> a = random_floats(static_cast<size_t>(n * d), 61);
    const std::vector<float> c = random_floats(static_cast<size_t>(n * d), 62);
    compare("add n=" + std::to_string(n), kElementwise, [&](Backend& b) {
      DeviceTensor at = upload(b.device(), DType::kF32, {n, d}, a);
      DeviceTensor ct = upload(b.device(), DType::kF32, {n, d}, c);
      CheckedOps(b).add(at.view, ct.view, at.view);
      return download(b.device(), at.view);
    });
  }
}

TEST_P(BackendConformance, AddBias) {
  const int64_t d = 576;
  const std::vector<float> bias = random_floats(static_cast<size_t>(d), 65);
  for (int64_t n : {kFewRows, kPromptRows}) {
    const std::vector<float> x = random_floats(static_cast<size_t>(n * d), 66);
    compare("add_bias n=" + std::to_string(n), kElementwise, [&](Backend& b) {
      DeviceTensor xt = upload(b.device(), DType::kF32, {n, d}, x);
      DeviceTensor bt = upload(b.device(), DType::kF32, {d}, bias);
      CheckedOps(b).add_bias(xt.view, bt.view, xt.view);
      return download(b.device(), xt.view);
    });
  }
}

TEST_P(BackendConformance, GeGLUSmallAndLarge) {
  // Gates past ±10 reach GELU's flat ends, where tanh saturates.
  for (int64_t n : {7 * 2048 + 5, 64 * 2048}) {
    const std::vector<float> gate = random_floats(static_cast<size_t>(n), 67, -12.0f, 12.0f);
    const std::vector<float> up = random_floats(static_cast<size_t>(n), 68);
    compare("geglu " + std::to_string(n), kElementwise, [&](Backend& b) {
      DeviceTensor g = upload(b.device(), DType::kF32, {n}, gate);
      DeviceTensor u = upload(b.device(), DType::kF32, {n}, up);
      CheckedOps(b).geglu(g.view, u.view, u.view);
      return download(b.device(), u.view);
    });
  }
}

TEST_P(BackendConformance, Scale) {
  const int64_t d = 640;
  for (int64_t n : {kFewRows, kPromptRows}) {
    const std::vector<float> x = random_floats(static_cast<size_t>(n * d), 69);
    compare("scale n=" + std::to_string(n), kElementwise, [&](Backend& b) {
      DeviceTensor xt = upload(b.device(), DType::kF32, {n, d}, x);
      CheckedOps(b).scale(xt.view, 25.298221f, xt.view);
      return download(b.device(), xt.view);
    });
  }
}

// ---- attention ------------------------------------------------------------------

// SmolLM2's geometry: 9 query heads in 3 groups of 64.
constexpr int32_t kHeads = 9, kKvHeads = 3, kHeadDim = 64, kLayers = 2;
constexpr int64_t kCapacity = 1024;

// Random values as the cache stores them: rounded to f16 for an f16 cache,
// so that both backends attend over exactly the same keys and values.
std::vector<float> cache_values(size_t n, uint32_t seed, float lo, float hi, DType dtype) {
  std::vector<float> v = random_floats(n, seed, lo, hi);
  if (dtype == DType::kF16) {
    for (float& x : v) x = f16_to_f32(f32_to_f16(x));
  }
  return v;
}

KVCacheSpec attention_cache(int32_t block_tokens, DType dtype) {
  return KVCacheSpec{"contiguous", kLayers, kKvHeads, kHeadDim, kCapacity, block_tokens, dtype};
}

// One backend's attention `impl` (its first by default) and cache, fed step
// by step.
struct AttentionRun {
  AttentionRun(Backend& b, const KVCacheSpec& spec, const std::string& impl = "",
               int32_t window = 0)
      : backend(b),
        attention(b.create_attention(
            impl.empty() ? b.attention_impls().front() : impl,
            AttentionSpec{kHeads, kKvHeads, kHeadDim, 1.0f / std::sqrt(float{kHeadDim}), window})),
        kv(b.create_kv_cache(spec)) {}

  // Positions [first, first + n) of one sequence held in `table`, on layer
  // 1, with K and V values representable in `values` (the dtype under test).
  std::vector<float> step(const std::vector<int32_t>& table, int32_t first, int32_t n,
                          uint32_t seed, DType values) {
    const int32_t block = kv->spec().block_tokens;
    StepBatch batch;
    batch.n_tokens = n;
    batch.n_prefill_tokens = n > 1 ? n : 0;
    for (int32_t i = 0; i < n; ++i) {
      const int32_t p = first + i;
      batch.positions.push_back(p);
      batch.slot_mapping.push_back(table[static_cast<size_t>(p / block)] * block + p % block);
    }
    batch.sequences.push_back(SequenceStep{0, 0, n, first + n, table});
    Device& d = backend.device();
    const auto kv_size = static_cast<size_t>(n * kKvHeads * kHeadDim);
    DeviceTensor q =
        upload(d, DType::kF32, {n, kHeads, kHeadDim},
               random_floats(static_cast<size_t>(n * kHeads * kHeadDim), seed, -2.0f, 2.0f));
    DeviceTensor k = upload(d, DType::kF32, {n, kKvHeads, kHeadDim},
                            cache_values(kv_size, seed + 1, -2.0f, 2.0f, values));
    DeviceTensor v = upload(d, DType::kF32, {n, kKvHeads, kHeadDim},
                            cache_values(kv_size, seed + 2, -1.0f, 1.0f, values));
    DeviceTensor out = zeros(d, {n, kHeads, kHeadDim});
    attention->forward(1, batch, q.view, k.view, v.view, *kv, out.view);
    return download(d, out.view);
  }

  // The first `slots` slots of every layer, exported and widened to f32.
  std::vector<float> exported(int64_t slots) {
    std::vector<uint8_t> bytes;
    kv->export_slots(slots, bytes);
    const DType dtype = kv->spec().dtype;
    const auto& t = dtype_traits(dtype);
    std::vector<float> floats(bytes.size() / static_cast<size_t>(t.block_bytes) *
                              static_cast<size_t>(t.block_size));
    dequantize_row(dtype, bytes.data(), floats.data(), static_cast<int64_t>(floats.size()));
    return floats;
  }

  Backend& backend;
  std::unique_ptr<Attention> attention;
  std::unique_ptr<KVCache> kv;
};

void BackendConformance::check_attention(const std::string& layout, int32_t block_tokens,
                                         const std::vector<int32_t>& table, DType dtype,
                                         int32_t window) {
  const Support s = backend_->check_kv_cache(attention_cache(block_tokens, dtype));
  if (!s.ok()) GTEST_SKIP() << s.reasons.front();
  // Every attention the backend provides computes the same function.
  for (const std::string& impl : backend_->attention_impls()) {
    SCOPED_TRACE("attention '" + impl + "'");
    check_attention_impl(impl, layout, block_tokens, table, dtype, window);
  }
}

void BackendConformance::check_attention_impl(const std::string& impl, const std::string& layout,
                                              int32_t block_tokens,
                                              const std::vector<int32_t>& table, DType dtype,
                                              int32_t window) {
  // Both caches store `dtype`, rounding what they are fed the same way.
  AttentionRun want(*reference_, attention_cache(block_tokens, dtype), "", window);
  AttentionRun got(*backend_, attention_cache(block_tokens, dtype), impl, window);
  const Support runs = got.attention->check(attention_cache(block_tokens, dtype));
  if (!runs.ok()) GTEST_SKIP() << runs.reasons.front();
  struct Step {
    int32_t first, n;
  };
  // A short prompt and a decode step over a few positions (split across KV
  // heads), prompt chunks long enough for tiles, then decode steps over
  // enough positions to be split into stretches, and a short chunk.
  const Step steps[] = {{0, 5},   {5, 1},   {6, 300}, {306, 301},
                        {607, 1}, {608, 1}, {609, 7}, {616, 1}};
  uint32_t seed = 100;
  for (const Step& st : steps) {
    const std::string what = "attention " + impl + " " + layout + " " +
                             std::string(dtype_name(dtype)) + " window " + std::to_string(window) +
                             " positions " + std::to_string(st.first) + ".." +
                             std::to_string(st.first + st.n - 1);
    compare(what, dtype == DType::kQ8_0 ? kInt8Cache : kElementwise, [&](Backend& b) {
      return (&b == reference_.get() ? want : got).step(table, st.first, st.n, seed, dtype);
    });
    seed += 3;
  }
  // The cache itself: every slot, value for value, in the export layout.
  const int64_t slots = int64_t{*std::max_element(table.begin(), table.end()) + 1} * block_tokens;
  EXPECT_EQ(got.exported(slots), want.exported(slots)) << layout;
}

// 16-slot blocks out of order, with a few consecutive runs among them.
std::vector<int32_t> paged_table() {
  std::vector<int32_t> table;
  for (int32_t b = 0; b < static_cast<int32_t>(kCapacity / 16); ++b) table.push_back(b);
  std::mt19937 rng(7);
  std::shuffle(table.begin() + 8, table.end(), rng);
  std::reverse(table.begin(), table.begin() + 4);
  table.resize(40);  // 640 positions
  return table;
}

TEST_P(BackendConformance, AttentionOverAContiguousCache) {
  check_attention("contiguous", static_cast<int32_t>(kCapacity), {0}, DType::kF32);
}

TEST_P(BackendConformance, AttentionOverAPagedCache) {
  check_attention("paged", 16, paged_table(), DType::kF32);
}

TEST_P(BackendConformance, AttentionOverAContiguousF16Cache) {
  check_attention("contiguous", static_cast<int32_t>(kCapacity), {0}, DType::kF16);
}

TEST_P(BackendConformance, AttentionOverAPagedF16Cache) {
  check_attention("paged", 16, paged_table(), DType::kF16);
}

TEST_P(BackendConformance, AttentionOverAContiguousQ8Cache) {
  check_attention("contiguous", static_cast<int32_t>(kCapacity), {0}, DType::kQ8_0);
}

TEST_P(BackendConformance, AttentionOverAPagedQ8Cache) {
  check_attention("paged", 16, paged_table(), DType::kQ8_0);
}

// Sliding-window layers: a window shorter than a prompt tile's positions (a
// tile's rows then see different stretches of them), and one long enough
// that decode rows split it into stretches not starting at position 0.
TEST_P(BackendConformance, WindowedAttentionOverAPagedCache) {
  check_attention("paged", 16, paged_table(), DType::kF32, 100);
}

TEST_P(BackendConformance, WindowedAttentionOverAPagedF16Cache) {
  check_attention("paged", 16, paged_table(), DType::kF16, 37);
}

TEST_P(BackendConformance, WindowedAttentionOverAContiguousQ8Cache) {
  check_attention("contiguous", static_cast<int32_t>(kCapacity), {0}, DType::kQ8_0, 550);
}

// A q8_0 cache exported, imported into a fresh cache and exported again
// gives the same bytes, the imported cache attends exactly as the original,
// and copy_blocks moves whole blocks — through whatever layout the backend
// keeps (the onednn backend's tiles of 16 slots on VNNI CPUs; blocks of 8
// slots here, so half tiles).
TEST_P(BackendConformance, AQ8CacheSurvivesExportImportAndCopyBlocks) {
  const KVCacheSpec spec = attention_cache(8, DType::kQ8_0);
  const Support s = backend_->check_kv_cache(spec);
  if (!s.ok()) GTEST_SKIP() << s.reasons.front();
  const std::vector<int32_t> table = {0, 1, 2, 3, 4, 5, 6, 7};  // 64 positions
  AttentionRun original(*backend_, spec), copy(*backend_, spec);
  const int32_t n = 45;
  original.step(table, 0, n, 81, DType::kQ8_0);
  std::vector<uint8_t> bytes, again;
  original.kv->export_slots(n, bytes);
  copy.kv->import_slots(n, bytes);
  copy.kv->export_slots(n, again);
  EXPECT_EQ(again, bytes);
  const std::vector<float> want = original.step(table, n, 1, 83, DType::kQ8_0);
  EXPECT_EQ(copy.step(table, n, 1, 83, DType::kQ8_0), want);

  copy.kv->copy_blocks(1, 5, 2);  // slots 8..23 onto 40..55
  const int64_t slots = 56;
  copy.kv->export_slots(slots, again);
  const size_t row = bytes.size() / (2 * kLayers * n);  // bytes of one slot's row
  for (size_t part = 0; part < 2 * kLayers; ++part) {   // [layer][k|v]
    const auto first = again.begin() + static_cast<std::ptrdiff_t>(part * slots * row);
    EXPECT_TRUE(std::equal(first + 8 * row, first + 24 * row, first + 40 * row)) << part;
    // Untouched slots keep what was imported.
    const auto imported = bytes.begin() + static_cast<std::ptrdiff_t>(part * n * row);
    EXPECT_TRUE(std::equal(first, first + 40 * row, imported)) << part;
  }
}

// What KVCache's contract says a cache refuses, with kInternal: slots
// beyond the capacity, overlapping block copies, an import of the wrong
// size (core/include/duet/kv_cache.h).
TEST_P(BackendConformance, AKVCacheRefusesWhatItsContractRules) {
  for (DType dtype : {DType::kF32, DType::kQ8_0}) {
    const KVCacheSpec spec = attention_cache(16, dtype);
    if (!backend_->check_kv_cache(spec).ok()) continue;
    std::unique_ptr<KVCache> kv = backend_->create_kv_cache(spec);
    // The kind of error a call throws, "none" if it returns.
    const auto thrown = [](const auto& call) -> std::string {
      try {
        call();
      } catch (const Error& e) {
        return error_kind_name(e.kind());
      }
      return "none";
    };
    const std::string internal = error_kind_name(ErrorKind::kInternal);
    std::vector<uint8_t> bytes;
    EXPECT_EQ(thrown([&] { kv->export_slots(kCapacity + 1, bytes); }), internal);
    EXPECT_EQ(thrown([&] { kv->copy_blocks(0, 1, 2); }), internal);  // overlap
    EXPECT_EQ(thrown([&] { kv->copy_blocks(0, kCapacity / 16 - 1, 2); }),
              internal);  // past the end
    kv->export_slots(20, bytes);
    bytes.pop_back();
    EXPECT_EQ(thrown([&] { kv->import_slots(20, bytes); }), internal);
    EXPECT_EQ(thrown([&] { kv->copy_blocks(0, 2, 2); }), "none");
  }
}

// Keys and values stored in an f16 cache are rounded exactly as
// duet::f32_to_f16 rounds: to nearest, ties to even, with subnormals, and to
// ±inf beyond the range.
TEST_P(BackendConformance, AnF16CacheRoundsLikeF32ToF16) {
  const KVCacheSpec spec = attention_cache(static_cast<int32_t>(kCapacity), DType::kF16);
  const Support s = backend_->check_kv_cache(spec);
  if (!s.ok()) GTEST_SKIP() << s.reasons.front();
  const int32_t n = 64;
  const auto row = static_cast<size_t>(kKvHeads * kHeadDim);
  std::vector<float> k = random_floats(n * row, 71, -3.0f, 3.0f);
  std::vector<float> v = random_floats(n * row, 72, -1e-5f, 1e-5f);  // f16 subnormals
  // Halfway cases (1 + 2^-11, 1 + 3 * 2^-11), the range's edges and beyond.
  const float edges[] = {1.00048828125f, 1.00146484375f, 65504.0f, 65519.0f, 65520.0f,
                         -1e6f,          6.0e-8f,        2.9e-8f,  -0.0f};
  std::copy(std::begin(edges), std::end(edges), k.begin());
  AttentionRun run(*backend_, spec);
  StepBatch batch;
  batch.n_tokens = batch.n_prefill_tokens = n;
  for (int32_t i = 0; i < n; ++i) {
    batch.positions.push_back(i);
    batch.slot_mapping.push_back(i);
  }
  batch.sequences.push_back(SequenceStep{0, 0, n, n, {0}});
  Device& d = backend_->device();
  DeviceTensor q = upload(d, DType::kF32, {n, kHeads, kHeadDim},
                          random_floats(static_cast<size_t>(n * kHeads * kHeadDim), 73));
  DeviceTensor kt = upload(d, DType::kF32, {n, kKvHeads, kHeadDim}, k);
  DeviceTensor vt = upload(d, DType::kF32, {n, kKvHeads, kHeadDim}, v);
  DeviceTensor out = zeros(d, {n, kHeads, kHeadDim});
  run.attention->forward(1, batch, q.view, kt.view, vt.view, *run.kv, out.view);

  std::vector<uint8_t> bytes;
  run.kv->export_slots(n, bytes);  // [layer][k|v][slot][head][dim]
  const size_t part = row * n;     // f16 elements of K (or V) of one layer
  std::vector<uint16_t> halves(bytes.size() / 2);
  std::memcpy(halves.data(), bytes.data(), bytes.size());
  size_t mismatches = 0;
  for (size_t i = 0; i < part; ++i) {
    mismatches += halves[2 * part + i] != f32_to_f16(k[i]);  // layer 1, K
    mismatches += halves[3 * part + i] != f32_to_f16(v[i]);  // layer 1, V
  }
  EXPECT_EQ(mismatches, 0u);
}

INSTANTIATE_TEST_SUITE_P(Backends, BackendConformance, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<BackendCase>& p) {
                           return p.param.label;
                         });

}  // namespace
}  // namespace duet
