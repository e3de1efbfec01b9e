// Tests of the cuda backend (label gpu).
//
// The first half runs anywhere, GPU or not: the plugin loads and its probe
// explains a refusal, `duet plugins` lists it, options are validated before
// any device is touched, and the host-side logic of the forward pass
// (command fusion, the graph policy, step metadata) is checked on its own.
// The second half needs a CUDA device and skips with the probe's reason
// without one: whole-model logits and greedy tokens against the reference
// backend on a tiny model and on a SmolLM2-shaped random Q4_1 model, CUDA
// graphs against eager launches, tiled prompt attention against rows
// alone, the rows of a batched matmul against the same rows alone, and the
// out-of-memory error. Op-by-op conformance lives
// in backend_conformance_test.cc; batched decode through the scheduler in
// scheduler_test.cc.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "attention_split.h"
#include "capturing_registrar.h"
#include "command_fusion.h"
#include "cublas_library.h"
#include "cuda_options.h"
#include "device_tensor.h"
#include "duet/app/pipeline.h"
#include "duet/byte_size.h"
#include "duet/error.h"
#include "duet/plugin.h"
#include "graph_policy.h"
#include "random_floats.h"
#include "random_llama.h"
#include "random_weight.h"
#include "step_metadata.h"
#include "tiny_model.h"

namespace duet {
namespace {

namespace fs = std::filesystem;
using cuda::Command;

// ---- the plugin, loaded directly ------------------------------------------------

using testing_support::CapturingRegistrar;

struct LoadedPlugin {
  const DuetPluginDescriptor* descriptor = nullptr;
  CapturingRegistrar registrar;
  std::string refusal;  // the probe's reason; empty when it accepts this machine
};

// Loads build/plugins/duet-cuda.so once and calls create() whatever the
// probe says, so the factory's option checks are testable without a GPU.
// Never unloaded: backends it made run its code until the process exits.
const LoadedPlugin& cuda_plugin() {
  static const LoadedPlugin* plugin = [] {
    const char* path = DUET_BUILD_DIR "/plugins/duet-cuda.so";
    void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) throw std::runtime_error(std::string("dlopen: ") + dlerror());
    auto entry = reinterpret_cast<DuetPluginEntryFn>(dlsym(handle, DUET_PLUGIN_ENTRY_SYMBOL));
    if (entry == nullptr) throw std::runtime_error(std::string("dlsym: ") + dlerror());
    auto* p = new LoadedPlugin;
    p->descriptor = entry();
    char reason[512] = {};
    if (p->descriptor->probe(reason, sizeof reason) == 0) p->refusal = reason;
    char error[512] = {};
    if (p->descriptor->create(&p->registrar, error, sizeof error) != 0) {
      throw std::runtime_error(std::string("create: ") + error);
    }
    return p;
  }();
  return *plugin;
}

Options backend_options(std::map<std::string, std::string> values) {
  Options o("backend.options");
  for (const auto& [k, v] : values) o.set(k, v);
  return o;
}

// The error `fn` throws; fails the test when it throws none.
template <typename Fn>
Error error_of(Fn fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no duet::Error thrown";
  return Error(ErrorKind::kInternal, "");
}

#define SKIP_WITHOUT_GPU()                                                     \
  do {                                                                         \
    if (!cuda_plugin().refusal.empty()) GTEST_SKIP() << cuda_plugin().refusal; \
  } while (false)

// ---- loading and probing: these run on every machine ------------------------------

TEST(CudaPlugin, ProbeAcceptsADeviceOrSaysThereIsNone) {
  const LoadedPlugin& p = cuda_plugin();
  EXPECT_STREQ(p.descriptor->name, "cuda");
  if (!p.refusal.empty()) {
    EXPECT_EQ(p.refusal.rfind("no CUDA device", 0), 0u) << p.refusal;
  }
  EXPECT_EQ(p.registrar.backends.count("cuda"), 1u);
}

// The plugin host loads every plugin it finds, so whatever duet-cuda.so
// links is paid by every duet process; cuBLAS alone was ~95 MiB of RSS.
// Checked in a freshly started child process: other tests of this binary
// open cuBLAS, and a forked child would inherit their mappings.
TEST(CudaPlugin, LoadingItMapsNoCublas) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        if (dlopen(DUET_BUILD_DIR "/plugins/duet-cuda.so", RTLD_NOW | RTLD_LOCAL) == nullptr)
          std::_Exit(2);
        std::ifstream maps("/proc/self/maps");
        std::string line;
        while (std::getline(maps, line)) {
          if (line.find("libcublas") != std::string::npos) std::_Exit(1);
        }
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(CublasLibrary, OpensTheToolkitsCublasAndResolvesEveryFunction) {
  const cuda::CublasLibrary& blas = cuda::CublasLibrary::get();
  EXPECT_NE(blas.create, nullptr);
  EXPECT_NE(blas.destroy, nullptr);
  EXPECT_NE(blas.set_stream, nullptr);
  EXPECT_NE(blas.gemm_ex, nullptr);
  // A call that needs no device.
  EXPECT_STREQ(blas.status_name(CUBLAS_STATUS_NOT_INITIALIZED), "CUBLAS_STATUS_NOT_INITIALIZED");
  EXPECT_EQ(&cuda::CublasLibrary::get(), &blas) << "opened once";
  EXPECT_EQ(std::string(cuda::CublasLibrary::soname()).rfind("libcublas.so.", 0), 0u);
}

TEST(CudaPlugin, DuetPluginsListsItLoadedOrRefusedWithTheReason) {
  const fs::path out =
      fs::temp_directory_path() / ("duet-cuda-plugins-" + std::to_string(::getpid()));
  const std::string cmd = std::string(DUET_BUILD_DIR) +
                          "/bin/duet plugins --plugin-path " DUET_BUILD_DIR "/plugins >" +
                          out.string() + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  std::ifstream in(out);
  std::stringstream text;
  text << in.rdbuf();
  fs::remove(out);
  const std::string listing = text.str();
  if (cuda_plugin().refusal.empty()) {
    EXPECT_NE(listing.find("cuda 0.1.0  loaded"), std::string::npos) << listing;
    EXPECT_NE(listing.find("backend cuda:"), std::string::npos) << listing;
  } else {
    // Refused by its probe, not as "not a loadable shared library": the
    // library loads without a driver.
    EXPECT_NE(listing.find("cuda 0.1.0  REFUSED"), std::string::npos) << listing;
    EXPECT_NE(listing.find("reason: cannot run here: no CUDA device"), std::string::npos)
        << listing;
  }
}

TEST(CudaOptions, DefaultsAndEveryKey) {
  const cuda::CudaOptions d = cuda::parse_cuda_options(backend_options({}));
  EXPECT_EQ(d.device, 0);
  EXPECT_TRUE(d.cuda_graphs);
  EXPECT_TRUE(d.pdl);
  EXPECT_TRUE(d.fuse);
  EXPECT_FALSE(d.graph_stats);
  EXPECT_EQ(d.split_attention, 512);
  EXPECT_EQ(d.matmul_min_rows, 9);  // decode steps of up to 8 sequences on the gemv
  EXPECT_FALSE(d.batch_invariant);
  EXPECT_EQ(cuda::parse_cuda_options(backend_options({{"split_attention", "0"}})).split_attention,
            0);
  EXPECT_EQ(cuda::parse_cuda_options(backend_options({{"matmul_min_rows", "65"}})).matmul_min_rows,
            65);
  // Batch invariance sends every row through the gemv and never splits.
  const cuda::CudaOptions inv =
      cuda::parse_cuda_options(backend_options({{"batch_invariant", "true"}}));
  EXPECT_TRUE(inv.batch_invariant);
  EXPECT_GE(inv.matmul_min_rows, int64_t{1} << 30);
  EXPECT_EQ(inv.split_attention, 0);
  EXPECT_FALSE(inv.tiled_attention);
  EXPECT_FALSE(d.tiled_attention);
  EXPECT_TRUE(
      cuda::parse_cuda_options(backend_options({{"tiled_attention", "true"}})).tiled_attention);
  const cuda::CudaOptions o = cuda::parse_cuda_options(backend_options({{"device", "1"},
                                                                        {"cuda_graphs", "false"},
                                                                        {"pdl", "false"},
                                                                        {"fuse", "false"},
                                                                        {"graph_stats", "true"}}));
  EXPECT_EQ(o.device, 1);
  EXPECT_FALSE(o.cuda_graphs);
  EXPECT_FALSE(o.pdl);
  EXPECT_FALSE(o.fuse);
  EXPECT_TRUE(o.graph_stats);
}

// The split of decode attention: none up to the threshold; past it,
// stretches of 128 * 2^j positions, a multiple of 32, at most 64 of them,
// together covering every position, both powers of two (few distinct
// launches, so few CUDA graph captures over a generation).
TEST(CudaAttentionSplit, CoversEveryPositionInFewDistinctShapes) {
  EXPECT_EQ(cuda::choose_attention_split(4096, 0), cuda::AttentionSplit{});
  EXPECT_EQ(cuda::choose_attention_split(512, 512), cuda::AttentionSplit{});
  EXPECT_EQ(cuda::choose_attention_split(513, 512), (cuda::AttentionSplit{8, 128}));
  EXPECT_EQ(cuda::choose_attention_split(1920, 512), (cuda::AttentionSplit{16, 128}));
  EXPECT_EQ(cuda::choose_attention_split(8192, 512), (cuda::AttentionSplit{64, 128}));
  EXPECT_EQ(cuda::choose_attention_split(8193, 512), (cuda::AttentionSplit{64, 256}));
  EXPECT_EQ(cuda::choose_attention_split(100, 1), (cuda::AttentionSplit{}));  // one stretch
  const auto power_of_two = [](int64_t x) { return x > 0 && (x & (x - 1)) == 0; };
  std::set<std::pair<int32_t, int32_t>> shapes;
  for (int64_t n = 1; n <= 200000; n += 37) {
    const cuda::AttentionSplit s = cuda::choose_attention_split(n, 512);
    if (s.splits == 1) {
      EXPECT_LE(n, 512);
      continue;
    }
    EXPECT_GE(int64_t{s.splits} * s.split_positions, n) << n;
    EXPECT_LT(int64_t{s.splits / 2} * s.split_positions, n) << n;  // the fewest that cover
    EXPECT_LE(s.splits, cuda::kMaxAttentionSplits);
    EXPECT_EQ(s.split_positions % 32, 0);
    EXPECT_TRUE(power_of_two(s.splits) && power_of_two(s.split_positions)) << n;
    shapes.insert({s.splits, s.split_positions});
  }
  EXPECT_LE(shapes.size(), 16u);
}

// A step's rows in attention launches: prompt chunks of 16 rows or more
// tiled, each on its own; the rest per row, neighbours merged; anything
// unexpected one per-row launch.
TEST(CudaAttentionSplit, PromptChunksAreTiledAndTheOtherRowsMerged) {
  using cuda::AttentionRows;
  StepBatch step;
  const auto add = [&](int32_t rows) {
    step.sequences.push_back(
        SequenceStep{static_cast<int32_t>(step.sequences.size()), step.n_tokens, rows, 100, {0}});
    step.n_tokens += rows;
  };
  add(1);  // decode rows
  add(1);
  add(40);  // a prompt chunk
  add(15);  // too short for a tile
  add(1);
  add(16);
  EXPECT_EQ(
      cuda::attention_rows(step, true),
      (std::vector<AttentionRows>{{0, 2, false}, {2, 40, true}, {42, 16, false}, {58, 16, true}}));
  EXPECT_EQ(cuda::attention_rows(step, false), (std::vector<AttentionRows>{{0, 74, false}}));
  StepBatch gap = step;  // sequences out of row order
  std::swap(gap.sequences[0], gap.sequences[2]);
  EXPECT_EQ(cuda::attention_rows(gap, true), (std::vector<AttentionRows>{{0, 74, false}}));
  StepBatch short_of_rows = step;  // the sequences cover fewer rows than the step has
  short_of_rows.n_tokens += 3;
  EXPECT_EQ(cuda::attention_rows(short_of_rows, true),
            (std::vector<AttentionRows>{{0, 77, false}}));
}

TEST(CudaOptions, BadValuesAndUnknownKeysAreRejectedWithTheKeyPath) {
  const Error bool_error = error_of([] {
    cuda::parse_cuda_options(backend_options({{"cuda_graphs", "yes"}}));
  });
  EXPECT_EQ(bool_error.kind(), ErrorKind::kConfig);
  EXPECT_NE(std::string(bool_error.what()).find("backend.options.cuda_graphs"), std::string::npos)
      << bool_error.what();
  const Error device_error = error_of([] {
    cuda::parse_cuda_options(backend_options({{"device", "-1"}}));
  });
  EXPECT_EQ(device_error.kind(), ErrorKind::kConfig);
  EXPECT_NE(std::string(device_error.what()).find("backend.options.device"), std::string::npos);
  const Error typo = error_of([] {
    cuda::parse_cuda_options(backend_options({{"cuda_graph", "true"}}));
  });
  EXPECT_EQ(typo.kind(), ErrorKind::kConfig);
  EXPECT_NE(std::string(typo.what()).find("cuda_graph"), std::string::npos) << typo.what();
}

TEST(CudaOptions, BatchInvariantRefusesTheOptionsItFixes) {
  for (const auto& [fixed, value] : std::map<std::string, std::string>{
           {"matmul_min_rows", "4"}, {"split_attention", "4"}, {"tiled_attention", "true"}}) {
    const Error e = error_of([&] {
      cuda::parse_cuda_options(backend_options({{"batch_invariant", "true"}, {fixed, value}}));
    });
    EXPECT_EQ(e.kind(), ErrorKind::kConfig);
    const std::string what = e.what();
    EXPECT_NE(what.find("backend.options." + fixed), std::string::npos) << what;
    EXPECT_NE(what.find("remove one of backend.options.batch_invariant"), std::string::npos)
        << what;
  }
  const Error rows = error_of([] {
    cuda::parse_cuda_options(backend_options({{"matmul_min_rows", "0"}}));
  });
  EXPECT_NE(std::string(rows.what()).find("backend.options.matmul_min_rows"), std::string::npos)
      << rows.what();
}

TEST(CudaOptions, TheFactoryChecksOptionsBeforeItLooksForADevice) {
  const BackendFactory& make = cuda_plugin().registrar.backends.at("cuda");
  const Error e = error_of([&] { make(backend_options({{"threads", "2"}})); });
  EXPECT_EQ(e.kind(), ErrorKind::kConfig) << e.what();
  EXPECT_NE(std::string(e.what()).find("threads"), std::string::npos) << e.what();
  const Error far = error_of([&] { make(backend_options({{"device", "1000"}})); });
  if (cuda_plugin().refusal.empty()) {
    EXPECT_EQ(far.kind(), ErrorKind::kConfig) << far.what();
    EXPECT_NE(std::string(far.what()).find("backend.options.device: 1000 but this machine has"),
              std::string::npos)
        << far.what();
  } else {
    EXPECT_EQ(far.kind(), ErrorKind::kPlugin) << far.what();
    EXPECT_NE(std::string(far.what()).find("no CUDA device"), std::string::npos) << far.what();
  }
}

// ---- command fusion -------------------------------------------------------------

// Fake device addresses, far apart: tensor i lives at 1 MiB * (i + 1).
float* at(int i) { return reinterpret_cast<float*>(static_cast<uintptr_t>(i + 1) << 20); }

Command gemv(const float* x, int64_t cols, const void* w, float* out, int64_t rows,
             int32_t x_rows = 1) {
  cuda::GemvCall g{x, cols, DType::kQ4_1, {}, 1, x_rows};
  g.segments[0] = cuda::GemvSegment{w, out, rows};
  return g;
}

Command rope(float* x, int32_t heads, const int32_t* positions) {
  cuda::RopeCall r;
  r.first = cuda::RopeTarget{x, heads};
  r.positions = positions;
  r.rows = 1;
  r.head_dim = 64;
  r.theta_base = 10000.0f;
  return r;
}

// One decode step of a Llama layer as core issues it (llama.cc).
std::vector<Command> decode_layer() {
  const auto* positions = reinterpret_cast<const int32_t*>(at(40));
  float *x = at(0), *h = at(1), *q = at(2), *k = at(3), *v = at(4), *attn = at(5), *proj = at(6),
        *gate = at(7), *up = at(8);
  const float* norm = at(20);
  return {cuda::RmsNormCall{x, norm, 1e-5f, 1, 576, h},
          gemv(h, 576, at(21), q, 576),
          gemv(h, 576, at(22), k, 192),
          gemv(h, 576, at(23), v, 192),
          rope(q, 9, positions),
          rope(k, 3, positions),
          cuda::AttentionCall{},
          gemv(attn, 576, at(24), proj, 576),
          cuda::AddCall{x, proj, 576, x},
          cuda::RmsNormCall{x, norm, 1e-5f, 1, 576, h},
          gemv(h, 576, at(25), gate, 1536),
          gemv(h, 576, at(26), up, 1536),
          cuda::SwiGLUCall{gate, up, 1536, gate},
          gemv(gate, 1536, at(27), proj, 576),
          cuda::AddCall{x, proj, 576, x},
          cuda::RmsNormCall{x, norm, 1e-5f, 1, 576, h}};
}

template <typename T>
const T& as(const Command& c) {
  EXPECT_TRUE(std::holds_alternative<T>(c)) << "command index " << c.index();
  static const T none{};
  return std::holds_alternative<T>(c) ? std::get<T>(c) : none;
}

TEST(CommandFusion, ALlamaDecodeLayerBecomesNineLaunches) {
  const std::vector<Command> fused = cuda::fuse_commands(decode_layer());
  ASSERT_EQ(fused.size(), 9u);
  EXPECT_TRUE(std::holds_alternative<cuda::RmsNormCall>(fused[0]));
  const auto& qkv = as<cuda::GemvCall>(fused[1]);
  EXPECT_EQ(qkv.count, 3);
  EXPECT_EQ(qkv.segments[1].out, at(3));
  EXPECT_EQ(qkv.segments[2].rows, 192);
  const auto& qk = as<cuda::RopeCall>(fused[2]);
  EXPECT_EQ(qk.first.x, at(2));
  EXPECT_EQ(qk.second.x, at(3));
  EXPECT_EQ(qk.second.heads, 3);
  EXPECT_TRUE(std::holds_alternative<cuda::AttentionCall>(fused[3]));
  EXPECT_EQ(as<cuda::GemvCall>(fused[4]).count, 1);
  const auto& residual = as<cuda::AddRmsNormCall>(fused[5]);
  EXPECT_EQ(residual.sum, at(0));
  EXPECT_EQ(residual.out, at(1));
  EXPECT_EQ(residual.rows, 1);
  EXPECT_EQ(residual.dim, 576);
  const auto& ffn = as<cuda::GemvSwiGLUCall>(fused[6]);
  EXPECT_EQ(ffn.w_gate, at(25));
  EXPECT_EQ(ffn.w_up, at(26));
  EXPECT_EQ(ffn.gate, at(7));
  EXPECT_EQ(ffn.up, at(8));
  EXPECT_EQ(ffn.rows, 1536);
  EXPECT_TRUE(ffn.into_gate);
  EXPECT_EQ(as<cuda::GemvCall>(fused[7]).count, 1);
  EXPECT_TRUE(std::holds_alternative<cuda::AddRmsNormCall>(fused[8]));
}

TEST(CommandFusion, SwiGLUFusesOnlyWithTheGemvsOfItsOwnGateAndUp) {
  float *x = at(0), *gate = at(1), *up = at(2);
  const auto pair = [&](float* g, float* u) {
    return cuda::fuse_commands({gemv(x, 64, at(10), g, 8), gemv(x, 64, at(11), u, 8)}).front();
  };
  // Into up instead of gate.
  const auto into_up = cuda::fuse_commands({pair(gate, up), cuda::SwiGLUCall{gate, up, 8, up}});
  ASSERT_EQ(into_up.size(), 1u);
  EXPECT_FALSE(as<cuda::GemvSwiGLUCall>(into_up[0]).into_gate);
  // Gate and up swapped, another output, a shorter swiglu: left alone.
  EXPECT_EQ(cuda::fuse_commands({pair(gate, up), cuda::SwiGLUCall{up, gate, 8, gate}}).size(), 2u);
  EXPECT_EQ(cuda::fuse_commands({pair(gate, up), cuda::SwiGLUCall{gate, up, 8, at(3)}}).size(), 2u);
  EXPECT_EQ(cuda::fuse_commands({pair(gate, up), cuda::SwiGLUCall{gate, up, 4, gate}}).size(), 2u);
  // Rows of x carry through; the swiglu must cover every row.
  const auto batched =
      cuda::fuse_commands({gemv(x, 64, at(10), gate, 8, 4), gemv(x, 64, at(11), up, 8, 4),
                           cuda::SwiGLUCall{gate, up, 32, gate}});
  ASSERT_EQ(batched.size(), 1u);
  EXPECT_EQ(as<cuda::GemvSwiGLUCall>(batched[0]).x_rows, 4);
  EXPECT_EQ(cuda::fuse_commands({gemv(x, 64, at(10), gate, 8, 4), gemv(x, 64, at(11), up, 8, 4),
                                 cuda::SwiGLUCall{gate, up, 8, gate}})
                .size(),
            2u);
  // A single gemv is not a gate/up pair.
  EXPECT_EQ(cuda::fuse_commands({gemv(x, 64, at(10), gate, 8), cuda::SwiGLUCall{gate, up, 8, gate}})
                .size(),
            2u);
}

TEST(CommandFusion, GemvsMergeOnlyWithTheSameInputAndApartOutputs) {
  float *x = at(0), *y = at(1);
  // Different inputs.
  EXPECT_EQ(
      cuda::fuse_commands({gemv(x, 64, at(10), at(2), 8), gemv(y, 64, at(11), at(3), 8)}).size(),
      2u);
  // Overlapping outputs: the second would race the first.
  EXPECT_EQ(cuda::fuse_commands({gemv(x, 64, at(10), at(2), 8), gemv(x, 64, at(11), at(2) + 4, 8)})
                .size(),
            2u);
  // The second writes where the first reads its weights.
  EXPECT_EQ(
      cuda::fuse_commands({gemv(x, 64, at(10), at(2), 8), gemv(x, 64, at(11), at(10), 8)}).size(),
      2u);
  // Different rows of x.
  EXPECT_EQ(
      cuda::fuse_commands({gemv(x, 64, at(10), at(2), 8, 2), gemv(x, 64, at(11), at(3), 8)}).size(),
      2u);
  // Outputs of 3 rows of x: [3, 8] each, so at(2) + 8 overlaps the first.
  EXPECT_EQ(
      cuda::fuse_commands({gemv(x, 64, at(10), at(2), 8, 3), gemv(x, 64, at(11), at(2) + 8, 8, 3)})
          .size(),
      2u);
  const auto batched = cuda::fuse_commands(
      {gemv(x, 64, at(10), at(2), 8, 3), gemv(x, 64, at(11), at(2) + 24, 8, 3)});
  ASSERT_EQ(batched.size(), 1u);
  EXPECT_EQ(as<cuda::GemvCall>(batched[0]).x_rows, 3);
  // The second writes over x's third row.
  EXPECT_EQ(
      cuda::fuse_commands({gemv(x, 64, at(10), at(2), 8, 3), gemv(x, 64, at(11), x + 128, 8, 3)})
          .size(),
      2u);
  // Four segments make a launch of three and one of one.
  const auto four =
      cuda::fuse_commands({gemv(x, 64, at(10), at(2), 8), gemv(x, 64, at(11), at(3), 8),
                           gemv(x, 64, at(12), at(4), 8), gemv(x, 64, at(13), at(5), 8)});
  ASSERT_EQ(four.size(), 2u);
  EXPECT_EQ(as<cuda::GemvCall>(four[0]).count, 3);
  EXPECT_EQ(as<cuda::GemvCall>(four[1]).count, 1);
}

TEST(CommandFusion, RopesMergeOnlyOnDisjointTensorsWithTheSamePositions) {
  const auto* p = reinterpret_cast<const int32_t*>(at(40));
  const auto* other = reinterpret_cast<const int32_t*>(at(41));
  EXPECT_EQ(cuda::fuse_commands({rope(at(0), 9, p), rope(at(0), 9, p)}).size(), 2u);
  EXPECT_EQ(cuda::fuse_commands({rope(at(0), 9, p), rope(at(1), 3, other)}).size(), 2u);
  // A pair is not extended to three.
  EXPECT_EQ(cuda::fuse_commands({rope(at(0), 9, p), rope(at(1), 3, p), rope(at(2), 3, p)}).size(),
            2u);
}

TEST(CommandFusion, AddFusesWithTheNormOfItsSumOnly) {
  float *a = at(0), *b = at(1), *sum = at(2), *out = at(3);
  const float* w = at(4);
  // The norm reads another tensor.
  EXPECT_EQ(cuda::fuse_commands(
                {cuda::AddCall{a, b, 64, sum}, cuda::RmsNormCall{a, w, 1e-5f, 1, 64, out}})
                .size(),
            2u);
  // The norm covers fewer elements than the add wrote.
  EXPECT_EQ(cuda::fuse_commands(
                {cuda::AddCall{a, b, 128, sum}, cuda::RmsNormCall{sum, w, 1e-5f, 1, 64, out}})
                .size(),
            2u);
  // The norm writes over an input of the add that other rows still read.
  EXPECT_EQ(cuda::fuse_commands(
                {cuda::AddCall{a, b, 64, sum}, cuda::RmsNormCall{sum, w, 1e-5f, 1, 64, b}})
                .size(),
            2u);
  // In place on the sum is fine.
  const auto in_place = cuda::fuse_commands(
      {cuda::AddCall{a, b, 128, sum}, cuda::RmsNormCall{sum, w, 1e-5f, 2, 64, sum}});
  ASSERT_EQ(in_place.size(), 1u);
  EXPECT_EQ(as<cuda::AddRmsNormCall>(in_place[0]).rows, 2);
}

// ---- graph policy ---------------------------------------------------------------

TEST(GraphPolicy, CapturesTheFirstDecodePassAndReplaysIdenticalOnes) {
  cuda::GraphPolicy policy(true);
  const std::vector<Command> pass = decode_layer();
  EXPECT_EQ(policy.next(false, pass), cuda::PassAction::kEager);  // prefill
  EXPECT_EQ(policy.next(true, pass), cuda::PassAction::kCapture);
  EXPECT_EQ(policy.next(true, pass), cuda::PassAction::kReplay);
  EXPECT_EQ(policy.next(true, pass), cuda::PassAction::kReplay);
  EXPECT_EQ(policy.next(false, pass),
            cuda::PassAction::kEager);  // a prefill leaves the graph alone
  EXPECT_EQ(policy.next(true, pass), cuda::PassAction::kReplay);
}

TEST(GraphPolicy, ANewShapeRunsEagerlyOnceThenIsRecaptured) {
  cuda::GraphPolicy policy(true);
  const std::vector<Command> a = decode_layer();
  std::vector<Command> b = a;
  std::get<cuda::RmsNormCall>(b[0]).x = at(30);  // scratch moved
  EXPECT_EQ(policy.next(true, a), cuda::PassAction::kCapture);
  EXPECT_EQ(policy.next(true, b), cuda::PassAction::kEager);
  EXPECT_EQ(policy.next(true, b), cuda::PassAction::kCapture);
  EXPECT_EQ(policy.next(true, b), cuda::PassAction::kReplay);
  // Passes that keep changing never pay for a capture.
  EXPECT_EQ(policy.next(true, a), cuda::PassAction::kEager);
  EXPECT_EQ(policy.next(true, b), cuda::PassAction::kReplay);
  EXPECT_EQ(policy.next(true, a), cuda::PassAction::kEager);
}

TEST(GraphPolicy, OffOrForgottenMeansNoReplay) {
  cuda::GraphPolicy off(false);
  EXPECT_EQ(off.next(true, decode_layer()), cuda::PassAction::kEager);
  EXPECT_EQ(off.next(true, decode_layer()), cuda::PassAction::kEager);
  cuda::GraphPolicy on(true);
  EXPECT_EQ(on.next(true, decode_layer()), cuda::PassAction::kCapture);
  on.forget();
  EXPECT_EQ(on.next(true, decode_layer()), cuda::PassAction::kCapture);
}

TEST(GraphPolicy, DecodeStepsOfOneOrManySequencesAreEligibleAndNothingWithAPromptRow) {
  StepBatch one;
  one.n_tokens = 1;
  one.sequences.push_back(SequenceStep{0, 0, 1, 7, {0}});
  EXPECT_TRUE(cuda::is_decode_step(one));
  StepBatch batch;
  batch.n_tokens = 3;
  for (int32_t i = 0; i < 3; ++i) batch.sequences.push_back(SequenceStep{i, i, 1, 5 + i, {i}});
  EXPECT_TRUE(cuda::is_decode_step(batch));
  StepBatch mixed = batch;  // one sequence still prefilling
  mixed.n_tokens = 4;
  mixed.n_prefill_tokens = 2;
  mixed.sequences[2].n_tokens = 2;
  EXPECT_FALSE(cuda::is_decode_step(mixed));
  EXPECT_FALSE(cuda::is_decode_step(StepBatch{}));
}

TEST(GraphPolicy, PassesThroughCublasAreNeverCaptured) {
  std::vector<Command> pass = decode_layer();
  EXPECT_TRUE(cuda::capturable(pass));
  pass.push_back(cuda::GemmCall{at(0), at(21), DType::kQ4_1, 9, 576, 576, at(2)});
  EXPECT_FALSE(cuda::capturable(pass));
}

// ---- step metadata -----------------------------------------------------------------

StepBatch two_sequences() {
  StepBatch s;
  s.n_tokens = 3;
  s.n_prefill_tokens = 2;
  s.positions = {4, 5, 9};
  s.slot_mapping = {20, 21, 41};
  s.sequences.push_back(SequenceStep{0, 0, 2, 6, {5}});
  s.sequences.push_back(SequenceStep{1, 2, 1, 10, {1, 10}});
  return s;
}

TEST(StepMetadata, PacksPositionsSlotsAndBlockTablesAtFixedOffsets) {
  const StepBatch step = two_sequences();
  const cuda::StepLayout layout = cuda::layout_for(step, {});
  EXPECT_EQ(layout.rows, 16);
  EXPECT_EQ(layout.tables, 16);
  EXPECT_EQ(cuda::used_elements(step, layout), 3 * 16 + 3);
  std::vector<int32_t> packed(static_cast<size_t>(layout.elements()), -1);
  cuda::pack_step(step, layout, packed.data());
  auto slice = [&](int64_t offset, int64_t n) {
    return std::vector<int32_t>(packed.begin() + offset, packed.begin() + offset + n);
  };
  EXPECT_EQ(slice(layout.row_position(), 4), (std::vector<int32_t>{4, 5, 9, 0}));
  EXPECT_EQ(slice(layout.row_slot(), 4), (std::vector<int32_t>{20, 21, 41, 0}));
  EXPECT_EQ(slice(layout.row_table(), 4), (std::vector<int32_t>{0, 0, 1, 0}));
  EXPECT_EQ(slice(layout.block_tables(), 3), (std::vector<int32_t>{5, 1, 10}));
}

TEST(StepMetadata, CapacitiesOnlyGrowSoDecodeStepsKeepTheirAddresses) {
  StepBatch decode;
  decode.n_tokens = 1;
  decode.positions = {600};
  decode.slot_mapping = {600};
  decode.sequences.push_back(SequenceStep{0, 0, 1, 601, {0}});
  StepBatch prefill = decode;
  prefill.n_tokens = 100;
  prefill.positions.assign(100, 0);
  prefill.slot_mapping.assign(100, 0);
  const cuda::StepLayout small = cuda::layout_for(decode, {});
  const cuda::StepLayout big = cuda::layout_for(prefill, small);
  EXPECT_EQ(big.rows, 128);
  EXPECT_EQ(cuda::layout_for(decode, big), big);
  EXPECT_EQ(cuda::layout_for(prefill, big), big);
}

// ---- against the reference backend: these need a CUDA device ------------------------

// Σ(a - b)² / Σ b², as llama.cpp's test-backend-ops measures.
double nmse(std::span<const float> a, std::span<const float> b) {
  EXPECT_EQ(a.size(), b.size());
  double err = 0.0, ref = 0.0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    err += (double{a[i]} - b[i]) * (double{a[i]} - b[i]);
    ref += double{b[i]} * b[i];
  }
  return ref == 0.0 ? err : err / ref;
}

int32_t argmax(std::span<const float> v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

// A pipeline on `model` with backend `backend` and its `options`.
std::unique_ptr<Pipeline> make_pipeline(PluginHost& host, const fs::path& model,
                                        const std::string& backend,
                                        const std::string& options = "{}") {
  const std::string yaml = "model: {path: " + model.filename().string() +
                           "}\nbackend: {plugin: " + backend + ", options: " + options + R"(}
components:
  kv_cache: {capacity_tokens: 256}
  sampler: {chain: [greedy]}
stages:
  - prefill: {}
  - decode: {max_new_tokens: 8}
)";
  PipelineConfig config = parse_pipeline_config(yaml, "cuda_test.yaml", model.parent_path(), {});
  load_pipeline_plugins(config, host);
  return Pipeline::build(config, host);
}

// Logits of the prompt's last row, then of `steps` decode steps, each fed
// `feed[i]` (or, without feed, its own greedy token).
struct Trace {
  std::vector<std::vector<float>> logits;
  std::vector<int32_t> greedy;
};

Trace run_trace(Pipeline& p, const std::vector<int32_t>& prompt, int steps,
                const std::vector<int32_t>* feed) {
  NullSink sink;
  auto s = p.new_session(prompt);
  s->forward(static_cast<int32_t>(prompt.size()), false);
  Trace t;
  for (int i = 0; i <= steps; ++i) {
    t.logits.emplace_back(s->logits().begin(), s->logits().end());
    t.greedy.push_back(argmax(s->logits()));
    if (i == steps) break;
    s->append(feed != nullptr ? (*feed)[static_cast<size_t>(i)] : t.greedy.back());
    s->forward(1, false);
  }
  return t;
}

std::vector<int32_t> prompt_ids(int n, int32_t vocab) {
  std::vector<int32_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back(3 + (i * 3571) % (vocab - 3));
  return ids;
}

class CudaTinyModel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(testing::make_temp_dir("cuda-tiny"));
    testing::write_tiny_llama(*dir_ / "tiny.gguf");
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }
  static inline fs::path* dir_ = nullptr;
  PluginHost host_;
};

TEST_F(CudaTinyModel, LogitsFollowTheReferenceThroughPrefillAndDecode) {
  SKIP_WITHOUT_GPU();
  auto ref = make_pipeline(host_, *dir_ / "tiny.gguf", "reference");
  auto gpu = make_pipeline(host_, *dir_ / "tiny.gguf", "cuda");
  const auto prompt = prompt_ids(9, 320);
  const Trace expected = run_trace(*ref, prompt, 12, nullptr);
  const Trace got = run_trace(*gpu, prompt, 12, &expected.greedy);
  for (size_t i = 0; i < expected.logits.size(); ++i) {
    EXPECT_LE(nmse(got.logits[i], expected.logits[i]), 1e-4) << "step " << i;
  }
}

// Graphs, programmatic launch and fusion change how kernels are launched,
// never what they compute: the logits must not differ in a single bit.
TEST_F(CudaTinyModel, GraphsProgrammaticLaunchAndFusionGiveBitIdenticalLogits) {
  SKIP_WITHOUT_GPU();
  const auto prompt = prompt_ids(5, 320);
  auto eager = make_pipeline(host_, *dir_ / "tiny.gguf", "cuda",
                             "{cuda_graphs: false, pdl: false, fuse: false}");
  const Trace plain = run_trace(*eager, prompt, 16, nullptr);
  eager.reset();
  auto graphs = make_pipeline(host_, *dir_ / "tiny.gguf", "cuda",
                              "{cuda_graphs: true, pdl: true, fuse: true}");
  // Twice in one pipeline: the second session replays the first one's graph.
  for (int run = 0; run < 2; ++run) {
    const Trace replayed = run_trace(*graphs, prompt, 16, nullptr);
    EXPECT_EQ(replayed.greedy, plain.greedy) << "run " << run;
    for (size_t i = 0; i < plain.logits.size(); ++i) {
      EXPECT_EQ(replayed.logits[i], plain.logits[i]) << "run " << run << ", step " << i;
    }
  }
}

TEST_F(CudaTinyModel, PrefillThenDecodeEqualsALongerPrefill) {
  SKIP_WITHOUT_GPU();
  auto p = make_pipeline(host_, *dir_ / "tiny.gguf", "cuda");
  const auto ids = prompt_ids(12, 320);
  NullSink sink;
  auto whole = p->new_session(ids);
  whole->forward(12, false);
  const std::vector<float> expected(whole->logits().begin(), whole->logits().end());
  whole.reset();
  auto split = p->new_session(ids);
  split->forward(11, false);
  split->forward(1, false);
  EXPECT_LE(nmse(split->logits(), expected), 1e-4);
}

// A 70-token prompt attends in tiles of 32 rows (the last one partial);
// every row alone must give the same logits but for float rounding, and
// both must follow the reference. The two sum a row's positions in other
// orders: on an H200 (2026-12-04) their logits differed by an NMSE of up to
// 7.1e-9 (the prompt's step; 2-3e-10 after it); a row seeing one position
// too many or too few would move a 70th of its attention weight, and the
// logits by far more than the 1e-7 allowed.
TEST_F(CudaTinyModel, APromptAttendingInTilesGivesWhatRowsAloneGive) {
  SKIP_WITHOUT_GPU();
  const auto prompt = prompt_ids(70, 320);
  auto ref = make_pipeline(host_, *dir_ / "tiny.gguf", "reference");
  const Trace expected = run_trace(*ref, prompt, 8, nullptr);
  auto tiled = make_pipeline(host_, *dir_ / "tiny.gguf", "cuda", "{tiled_attention: true}");
  const Trace got = run_trace(*tiled, prompt, 8, &expected.greedy);
  tiled.reset();
  auto rows = make_pipeline(host_, *dir_ / "tiny.gguf", "cuda", "{tiled_attention: false}");
  const Trace alone = run_trace(*rows, prompt, 8, &expected.greedy);
  for (size_t i = 0; i < expected.logits.size(); ++i) {
    EXPECT_LE(nmse(got.logits[i], alone.logits[i]), 1e-7) << "step " << i;
    EXPECT_LE(nmse(got.logits[i], expected.logits[i]), 1e-4) << "step " << i;
  }
}

TEST_F(CudaTinyModel, AllocatingMoreThanIsFreeIsAnOutOfMemoryErrorWithBothSizes) {
  SKIP_WITHOUT_GPU();
  auto backend = cuda_plugin().registrar.backends.at("cuda")(backend_options({}));
  const MemoryInfo m = backend->device().memory();
  ASSERT_GT(m.free_bytes, 0u);
  const uint64_t ask = m.free_bytes + (uint64_t{1} << 30);
  const Error e = error_of([&] { backend->device().allocate(ask); });
  EXPECT_EQ(e.kind(), ErrorKind::kOutOfMemory);
  EXPECT_EQ(e.exit_code(), ExitCode::kOutOfMemory);
  const std::string what = e.what();
  EXPECT_NE(what.find("cannot allocate " + format_bytes(ask) + ": "), std::string::npos) << what;
  EXPECT_NE(what.find(" free of "), std::string::npos) << what;
  EXPECT_NE(what.find("capacity_tokens"), std::string::npos) << what;
}

// ---- batched rows -------------------------------------------------------------------

using testing::matmul;
using testing::same_bits;

// A decode step of a few sequences multiplies their rows through the gemv,
// each exactly as alone (memcmp, not a tolerance): 2, 3 and 5 rows take
// chunks of 2, 4 and 8 rows, 8 a full chunk. In batch-invariant mode every
// row count does, past a chunk (13: a full and a partial chunk) and past
// the default cuBLAS threshold (64).
TEST(CudaBatchedRows, MatmulRowsAreTheSameBitsAloneAndInAStep) {
  SKIP_WITHOUT_GPU();
  const BackendFactory& make = cuda_plugin().registrar.backends.at("cuda");
  const auto plain = make(backend_options({}));
  const auto invariant = make(backend_options({{"batch_invariant", "true"}}));
  // m = 203: the last block of four weight rows is partial.
  const int64_t m = 203, k = 576;
  for (DType type :
       {DType::kQ4_0, DType::kQ4_1, DType::kQ8_0, DType::kF16, DType::kBF16, DType::kF32}) {
    SCOPED_TRACE(dtype_name(type));
    const std::vector<uint8_t> w = testing::random_weight(type, m, k, 31);
    const std::vector<float> x = testdata::random_floats(static_cast<size_t>(64 * k), 32);
    const auto rows = [&](int64_t n) { return std::vector<float>(x.begin(), x.begin() + n * k); };
    std::vector<std::vector<float>> alone;
    for (int64_t i = 0; i < 64; ++i) {
      alone.push_back(matmul(*plain, type, m, k, w,
                             std::vector<float>(x.begin() + i * k, x.begin() + (i + 1) * k)));
    }
    const auto check = [&](Backend& backend, int64_t n, const char* mode) {
      const std::vector<float> step = matmul(backend, type, m, k, w, rows(n));
      for (int64_t i = 0; i < n; ++i) {
        EXPECT_TRUE(same_bits(std::vector<float>(step.begin() + i * m, step.begin() + (i + 1) * m),
                              alone[static_cast<size_t>(i)]))
            << mode << ": row " << i << " of " << n << " against alone";
      }
    };
    for (int64_t n : {2, 3, 5, 8}) check(*plain, n, "default");
    for (int64_t n : {1, 13, 64}) check(*invariant, n, "batch_invariant");
  }
}

// SmolLM2-135M's shape with random Q4_1 weights (core/random_model/random_llama.h).
class CudaSmolLM2Shaped : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!cuda_plugin().refusal.empty()) return;  // every test skips
    dir_ = new fs::path(testing::make_temp_dir("cuda-smollm2"));
    testing::write_random_llama(*dir_ / "random.gguf");
  }
  static void TearDownTestSuite() {
    if (dir_ != nullptr) fs::remove_all(*dir_);
    delete dir_;
    dir_ = nullptr;
  }
  static inline fs::path* dir_ = nullptr;
  PluginHost host_;
};

TEST_F(CudaSmolLM2Shaped, LogitsMatchTheReferenceAndGreedyTokensAreIdenticalFor32Tokens) {
  SKIP_WITHOUT_GPU();
  const auto prompt = prompt_ids(24, 49152);
  auto ref = make_pipeline(host_, *dir_ / "random.gguf", "reference");
  const Trace expected = run_trace(*ref, prompt, 32, nullptr);
  ref.reset();
  auto gpu = make_pipeline(host_, *dir_ / "random.gguf", "cuda");
  const Trace got = run_trace(*gpu, prompt, 32, &expected.greedy);
  double worst = 0.0;
  for (size_t i = 0; i < expected.logits.size(); ++i) {
    const double e = nmse(got.logits[i], expected.logits[i]);
    worst = std::max(worst, e);
    EXPECT_LE(e, 1e-3) << "step " << i;
  }
  std::printf("  largest logits nmse over the prompt and 32 decode steps: %.3g\n", worst);
  EXPECT_EQ(got.greedy, expected.greedy);
}

}  // namespace
}  // namespace duet
