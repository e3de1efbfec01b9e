// The onednn backend's batch-invariant mode (issue 17, backend option
// `batch_invariant: true`): a row's results are bit-identical (memcmp, not
// a tolerance) whatever else shares its step — other sequences' prompt
// chunks and decode rows, how its own prompt is cut into chunks, where its
// cache blocks lie — and whatever the number of threads. Checked for
// attention over f32, f16 and q8_0 caches (q8_0 in VNNI tiles where this CPU
// has them, with 16-slot blocks, and in rows with 24-slot blocks), for the
// matmul of every weight type, for SwiGLU, and for the whole SmolLM2 model.
// The backend comes from the plugin in the build tree, as the pipeline gets
// it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "device_tensor.h"
#include "duet/app/gguf.h"
#include "duet/app/model_hparams.h"
#include "duet/app/plugin_host.h"
#include "duet/error.h"
#include "duet/quant.h"
#include "models/model.h"
#include "onednn_plugin_host.h"
#include "random_floats.h"
#include "random_weight.h"

namespace duet {
namespace {

namespace fs = std::filesystem;
using testdata::random_floats;
using testing::DeviceTensor;
using testing::download;
using testing::matmul;
using testing::random_weight;
using testing::same_bits;
using testing::upload;
using testing::zeros;

PluginHost* host() { return testing::onednn_plugin_host(); }

std::shared_ptr<Backend> onednn(int threads, bool invariant = true) {
  Options options("backend.options");
  options.set("threads", std::to_string(threads));
  if (invariant) options.set("batch_invariant", "true");
  return host()->create_backend("onednn", options);
}

// Σ (got - want)² / Σ want².
double nmse(const std::vector<float>& got, const std::vector<float>& want) {
  double err = 0.0, ref = 0.0;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    err += (double{got[i]} - want[i]) * (double{got[i]} - want[i]);
    ref += double{want[i]} * want[i];
  }
  return ref == 0.0 ? err : err / ref;
}

class OnednnBatchInvariance : public ::testing::Test {
 protected:
  void SetUp() override {
    if (host() == nullptr) GTEST_SKIP() << "the onednn plugin is not built or is refused here";
  }
};

// ---- options ------------------------------------------------------------------

TEST_F(OnednnBatchInvariance, OptionIsParsedAndRefusedWithMatmulMinRows) {
  EXPECT_NE(onednn(1), nullptr);
  Options both("backend.options");
  both.set("batch_invariant", "true");
  both.set("matmul_min_rows", "8");
  try {
    host()->create_backend("onednn", both);
    ADD_FAILURE() << "batch_invariant with matmul_min_rows was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kConfig);
    const std::string what = e.what();
    EXPECT_NE(what.find("backend.options.matmul_min_rows"), std::string::npos) << what;
    EXPECT_NE(what.find("backend.options.batch_invariant"), std::string::npos) << what;
  }
  Options tiles("backend.options");
  tiles.set("batch_invariant", "true");
  tiles.set("row_tiles_min_rows", "0");
  try {
    host()->create_backend("onednn", tiles);
    ADD_FAILURE() << "batch_invariant with row_tiles_min_rows was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kConfig);
    EXPECT_NE(std::string(e.what()).find("backend.options.row_tiles_min_rows"), std::string::npos)
        << e.what();
  }
  Options bad("backend.options");
  bad.set("batch_invariant", "maybe");
  EXPECT_THROW(host()->create_backend("onednn", bad), Error);
}

// ---- attention ------------------------------------------------------------------

constexpr int32_t kHeads = 8, kKvHeads = 2, kHeadDim = 64;
constexpr int32_t kBlocks = 200;  // per cache

// Part of a step: positions [first, first + n) of sequence `seq`.
struct Piece {
  int32_t seq, first, n;
};

// One attention over one cache, driven step by step like a scheduler would:
// each sequence takes free blocks as it grows, in an order of its own
// (`placement` shuffles the free list), and every row's output is kept by
// (sequence, position). Each row's q, k and v depend only on those two.
class AttentionRig {
 public:
  AttentionRig(int threads, DType dtype, int32_t block_tokens, uint32_t placement,
               bool invariant = true, int32_t window = 0)
      : backend_(onednn(threads, invariant)), block_tokens_(block_tokens) {
    KVCacheSpec spec;
    spec.n_layers = 2;
    spec.n_kv_heads = kKvHeads;
    spec.head_dim = kHeadDim;
    spec.block_tokens = block_tokens;
    spec.capacity_tokens = int64_t{kBlocks} * block_tokens;
    spec.dtype = dtype;
    kv_ = backend_->create_kv_cache(spec);
    attention_ = backend_->create_attention(
        "full",
        AttentionSpec{kHeads, kKvHeads, kHeadDim, 1.0f / std::sqrt(float{kHeadDim}), window});
    free_.resize(kBlocks);
    std::iota(free_.begin(), free_.end(), 0);
    std::mt19937 rng(placement);
    if (placement != 0) std::shuffle(free_.begin(), free_.end(), rng);
  }

  void step(const std::vector<Piece>& pieces) {
    StepBatch batch;
    for (const Piece& piece : pieces) {
      std::vector<int32_t>& table = tables_[piece.seq];
      while (int64_t{static_cast<int32_t>(table.size())} * block_tokens_ < piece.first + piece.n) {
        table.push_back(free_[next_free_++]);
      }
      SequenceStep seq{piece.seq, batch.n_tokens, piece.n, piece.first + piece.n, table};
      for (int32_t p = piece.first; p < piece.first + piece.n; ++p) {
        batch.positions.push_back(p);
        batch.slot_mapping.push_back(table[static_cast<size_t>(p / block_tokens_)] * block_tokens_ +
                                     p % block_tokens_);
      }
      batch.n_tokens += piece.n;
      if (piece.n > 1) batch.n_prefill_tokens += piece.n;
      batch.sequences.push_back(std::move(seq));
    }
    const int64_t n = batch.n_tokens;
    std::vector<float> q, k, v;
    for (const Piece& piece : pieces) {
      for (int32_t p = piece.first; p < piece.first + piece.n; ++p) {
        const auto seed = static_cast<uint32_t>(piece.seq * 100003 + p * 7);
        const auto qr = random_floats(kHeads * kHeadDim, seed, -2.0f, 2.0f);
        const auto kr = random_floats(kKvHeads * kHeadDim, seed + 1, -2.0f, 2.0f);
        const auto vr = random_floats(kKvHeads * kHeadDim, seed + 2, -1.0f, 1.0f);
        q.insert(q.end(), qr.begin(), qr.end());
        k.insert(k.end(), kr.begin(), kr.end());
        v.insert(v.end(), vr.begin(), vr.end());
      }
    }
    Device& d = backend_->device();
    DeviceTensor qt = upload(d, DType::kF32, {n, kHeads, kHeadDim}, q);
    DeviceTensor kt = upload(d, DType::kF32, {n, kKvHeads, kHeadDim}, k);
    DeviceTensor vt = upload(d, DType::kF32, {n, kKvHeads, kHeadDim}, v);
    DeviceTensor out = zeros(d, {n, kHeads, kHeadDim});
    attention_->forward(1, batch, qt.view, kt.view, vt.view, *kv_, out.view);
    const std::vector<float> o = download(d, out.view);
    int64_t row = 0;
    for (const Piece& piece : pieces) {
      for (int32_t p = piece.first; p < piece.first + piece.n; ++p, ++row) {
        const auto* r = o.data() + row * kHeads * kHeadDim;
        rows[{piece.seq, p}] = std::vector<float>(r, r + kHeads * kHeadDim);
      }
    }
  }

  std::map<std::pair<int32_t, int32_t>, std::vector<float>> rows;  // (seq, position) -> output

 private:
  std::shared_ptr<Backend> backend_;
  int32_t block_tokens_;
  std::unique_ptr<KVCache> kv_;
  std::unique_ptr<Attention> attention_;
  std::vector<int32_t> free_;
  size_t next_free_ = 0;
  std::map<int32_t, std::vector<int32_t>> tables_;
};

// Sequence 0 has a 600-position prompt (three 256-position stretches) and two
// decode steps; sequences 1-3 are its neighbours in the batched runs.
constexpr int32_t kSubject = 0;

void run_alone(AttentionRig& rig, const std::vector<int32_t>& chunks) {
  int32_t at = 0;
  for (int32_t n : chunks) {
    rig.step({{kSubject, at, n}});
    at += n;
  }
  rig.step({{kSubject, 600, 1}});
  rig.step({{kSubject, 601, 1}});
}

void run_batched(AttentionRig& rig) {
  // Sequence 1: a long prompt, then decode; 2: a short prompt in chunks;
  // 3: a prompt of 40, then decode. The subject sits first, in the middle
  // and last of its steps, its prompt cut 37 + 263 + 300.
  rig.step({{kSubject, 0, 37}, {1, 0, 699}, {2, 0, 20}});
  rig.step({{1, 699, 1}, {kSubject, 37, 263}, {3, 0, 40}});
  rig.step({{3, 40, 1}, {2, 20, 40}, {kSubject, 300, 300}});
  rig.step({{1, 700, 1}, {kSubject, 600, 1}, {2, 60, 1}, {3, 41, 1}});
  rig.step({{kSubject, 601, 1}, {2, 61, 239}});
}

struct CacheCase {
  DType dtype;
  int32_t block_tokens;
  int32_t window = 0;  // a sliding-window layer's (AttentionSpec::window)
};

class OnednnBatchInvariantAttention : public OnednnBatchInvariance,
                                      public ::testing::WithParamInterface<CacheCase> {};

TEST_P(OnednnBatchInvariantAttention, RowsAreBitIdenticalAloneChunkedBatchedAndOnOneOrTwoThreads) {
  const CacheCase c = GetParam();
  const Support s = onednn(1)->check_kv_cache(KVCacheSpec{"contiguous", 2, kKvHeads, kHeadDim,
                                                          int64_t{kBlocks} * c.block_tokens,
                                                          c.block_tokens, c.dtype});
  if (!s.ok()) GTEST_SKIP() << s.reasons.front();
  AttentionRig whole(2, c.dtype, c.block_tokens, 0, true, c.window);
  run_alone(whole, {600});
  AttentionRig chunked(2, c.dtype, c.block_tokens, 11, true, c.window);
  run_alone(chunked, {37, 263, 300});
  AttentionRig batched(2, c.dtype, c.block_tokens, 12, true, c.window);
  run_batched(batched);
  AttentionRig batched_1_thread(1, c.dtype, c.block_tokens, 13, true, c.window);
  run_batched(batched_1_thread);
  AttentionRig batched_3_threads(3, c.dtype, c.block_tokens, 14, true, c.window);
  run_batched(batched_3_threads);

  int32_t compared = 0;
  for (int32_t p = 0; p < 602; ++p) {
    const std::vector<float>& want = whole.rows.at({kSubject, p});
    ASSERT_TRUE(same_bits(chunked.rows.at({kSubject, p}), want)) << "chunked, position " << p;
    ASSERT_TRUE(same_bits(batched.rows.at({kSubject, p}), want)) << "batched, position " << p;
    ASSERT_TRUE(same_bits(batched_1_thread.rows.at({kSubject, p}), want))
        << "batched on 1 thread, position " << p;
    ASSERT_TRUE(same_bits(batched_3_threads.rows.at({kSubject, p}), want))
        << "batched on 3 threads, position " << p;
    ++compared;
  }
  // The neighbours, too, whatever the thread count.
  for (const auto& [key, row] : batched.rows) {
    ASSERT_TRUE(same_bits(batched_1_thread.rows.at(key), row))
        << "sequence " << key.first << " position " << key.second;
  }
  EXPECT_EQ(compared, 602);
  // And it is the same attention as the default mode's, to rounding (as
  // backend_conformance_test bounds it; q8_0 may be integer arithmetic).
  AttentionRig usual(2, c.dtype, c.block_tokens, 0, false, c.window);
  run_alone(usual, {600});
  std::vector<float> got, want;
  for (int32_t p = 0; p < 602; ++p) {
    const std::vector<float>& a = whole.rows.at({kSubject, p});
    const std::vector<float>& b = usual.rows.at({kSubject, p});
    got.insert(got.end(), a.begin(), a.end());
    want.insert(want.end(), b.begin(), b.end());
  }
  EXPECT_LE(nmse(got, want), c.dtype == DType::kQ8_0 ? 1e-8 : 1e-10);
}

INSTANTIATE_TEST_SUITE_P(Caches, OnednnBatchInvariantAttention,
                         ::testing::Values(CacheCase{DType::kF32, 16}, CacheCase{DType::kF16, 16},
                                           CacheCase{DType::kQ8_0, 16}, CacheCase{DType::kF16, 24},
                                           CacheCase{DType::kQ8_0, 24},
                                           // A window starting inside a 256-position stretch.
                                           CacheCase{DType::kF16, 16, 300},
                                           CacheCase{DType::kQ8_0, 24, 300}),
                         [](const ::testing::TestParamInfo<CacheCase>& param) {
                           const CacheCase& c = param.param;
                           return std::string(dtype_name(c.dtype)) + "_blocks" +
                                  std::to_string(c.block_tokens) +
                                  (c.window > 0 ? "_window" + std::to_string(c.window) : "");
                         });

// ---- matmul and SwiGLU -------------------------------------------------------------

TEST_F(OnednnBatchInvariance, MatmulRowsAreBitIdenticalForOneOr37RowsAndOneOrTwoThreads) {
  // 37 rows are past the default GEMM threshold (16); m = 1000 leaves rows
  // that are no multiple of the kernels' 4-row passes or 16-row grain.
  const int64_t m = 1000, k = 576, n = 37;
  const auto two = onednn(2), one = onednn(1);
  for (DType type :
       {DType::kQ4_0, DType::kQ4_1, DType::kQ8_0, DType::kF16, DType::kBF16, DType::kF32}) {
    SCOPED_TRACE(dtype_name(type));
    const std::vector<uint8_t> w = random_weight(type, m, k, 5);
    const std::vector<float> x = random_floats(static_cast<size_t>(n * k), 6);
    const std::vector<float> all = matmul(*two, type, m, k, w, x);
    EXPECT_TRUE(same_bits(matmul(*one, type, m, k, w, x), all)) << "1 thread against 2";
    for (int64_t i : {int64_t{0}, int64_t{5}, n - 1}) {
      const std::vector<float> row(x.begin() + i * k, x.begin() + (i + 1) * k);
      const std::vector<float> alone = matmul(*two, type, m, k, w, row);
      EXPECT_TRUE(
          same_bits(alone, std::vector<float>(all.begin() + i * m, all.begin() + (i + 1) * m)))
          << "row " << i << " alone against among " << n;
    }
  }
}

TEST_F(OnednnBatchInvariance, SwigluRowsAreBitIdenticalForOneOrManyRows) {
  // 100 columns: each row ends in elements the vector loop leaves to the
  // scalar tail; 700 rows are enough to be split across threads.
  const int64_t cols = 100, n = 700;
  const auto backend = onednn(2);
  Device& d = backend->device();
  const std::vector<float> gate = random_floats(static_cast<size_t>(n * cols), 8, -6.0f, 6.0f);
  const std::vector<float> up = random_floats(static_cast<size_t>(n * cols), 9);
  auto swiglu = [&](int64_t first, int64_t rows) {
    const auto at = static_cast<size_t>(first * cols), size = static_cast<size_t>(rows * cols);
    DeviceTensor g = upload(d, DType::kF32, {rows, cols},
                            std::vector<float>(gate.begin() + at, gate.begin() + at + size));
    DeviceTensor u = upload(d, DType::kF32, {rows, cols},
                            std::vector<float>(up.begin() + at, up.begin() + at + size));
    DeviceTensor out = zeros(d, {rows, cols});
    backend->ops().swiglu(g.view, u.view, out.view);
    return download(d, out.view);
  };
  const std::vector<float> all = swiglu(0, n);
  for (int64_t i : {int64_t{0}, int64_t{1}, n - 1}) {
    const std::vector<float> alone = swiglu(i, 1);
    EXPECT_TRUE(
        same_bits(alone, std::vector<float>(all.begin() + i * cols, all.begin() + (i + 1) * cols)))
        << "row " << i;
  }
}

// ---- the whole model ----------------------------------------------------------------

// SmolLM2 with its own weights, the model driven step by step as a
// continuous-batching scheduler would: each sequence's logits at every
// position must not change when it runs with others or on one thread.
class ModelRig {
 public:
  ModelRig(int threads, DType kv_dtype, const std::shared_ptr<const GgufFile>& file,
           const ModelHParams& h, uint32_t placement, bool invariant = true)
      : backend_(onednn(threads, invariant)), hparams_(h) {
    model_ = make_model(file, h, *backend_);
    KVCacheSpec spec;
    spec.n_layers = h.n_layers;
    spec.n_kv_heads = h.n_kv_heads;
    spec.head_dim = h.head_dim;
    spec.block_tokens = kBlockTokens;
    spec.capacity_tokens = int64_t{kModelBlocks} * kBlockTokens;
    spec.dtype = kv_dtype;
    kv_ = backend_->create_kv_cache(spec);
    attention_ = backend_->create_attention(
        "full",
        AttentionSpec{h.n_heads, h.n_kv_heads, h.head_dim, 1.0f / std::sqrt(float(h.head_dim))});
    free_.resize(kModelBlocks);
    std::iota(free_.begin(), free_.end(), 0);
    std::mt19937 rng(placement);
    std::shuffle(free_.begin(), free_.end(), rng);
  }

  // Token ids of sequence `seq` are a fixed function of the position.
  static int32_t token(int32_t seq, int32_t position, int32_t vocab) {
    return static_cast<int32_t>((uint32_t(seq) * 7919u + uint32_t(position) * 104729u + 17u) %
                                uint32_t(vocab));
  }

  void step(const std::vector<Piece>& pieces) {
    StepBatch batch;
    std::vector<int32_t> tokens;
    for (const Piece& piece : pieces) {
      std::vector<int32_t>& table = tables_[piece.seq];
      while (static_cast<int32_t>(table.size()) * kBlockTokens < piece.first + piece.n) {
        table.push_back(free_[next_free_++]);
      }
      batch.sequences.push_back(
          SequenceStep{piece.seq, batch.n_tokens, piece.n, piece.first + piece.n, table});
      for (int32_t p = piece.first; p < piece.first + piece.n; ++p) {
        batch.positions.push_back(p);
        batch.slot_mapping.push_back(table[static_cast<size_t>(p / kBlockTokens)] * kBlockTokens +
                                     p % kBlockTokens);
        tokens.push_back(token(piece.seq, p, hparams_.n_vocab));
      }
      batch.n_tokens += piece.n;
      if (piece.n > 1) batch.n_prefill_tokens += piece.n;
    }
    // Logits of every 8th position and of each piece's last (the output
    // matrix dominates the time otherwise).
    std::vector<int32_t> logit_rows;
    std::vector<std::pair<int32_t, int32_t>> keys;
    int32_t row = 0;
    for (const Piece& piece : pieces) {
      for (int32_t p = piece.first; p < piece.first + piece.n; ++p, ++row) {
        if (p % 8 == 0 || p == piece.first + piece.n - 1) {
          logit_rows.push_back(row);
          keys.emplace_back(piece.seq, p);
        }
      }
    }
    std::vector<float> logits;
    model_->forward(tokens, batch, *kv_, *attention_, logit_rows, logits);
    const auto vocab = static_cast<size_t>(hparams_.n_vocab);
    for (size_t i = 0; i < keys.size(); ++i) {
      rows[keys[i]] =
          std::vector<float>(logits.begin() + i * vocab, logits.begin() + (i + 1) * vocab);
    }
  }

  std::map<std::pair<int32_t, int32_t>, std::vector<float>> rows;  // (seq, position) -> logits

 private:
  static constexpr int32_t kBlockTokens = 16;
  static constexpr int32_t kModelBlocks = 64;
  std::shared_ptr<Backend> backend_;
  ModelHParams hparams_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<KVCache> kv_;
  std::unique_ptr<Attention> attention_;
  std::vector<int32_t> free_;
  size_t next_free_ = 0;
  std::map<int32_t, std::vector<int32_t>> tables_;
};

class OnednnBatchInvariantModel : public OnednnBatchInvariance,
                                  public ::testing::WithParamInterface<DType> {};

TEST_P(OnednnBatchInvariantModel, SmolLM2LogitsAreBitIdenticalAloneAndInABatch) {
  const fs::path path = fs::path(DUET_SOURCE_DIR) / "models/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!fs::exists(path)) GTEST_SKIP() << path << " is missing; run `bash scripts/fetch-model.sh`";
  const auto file = std::make_shared<const GgufFile>(GgufFile::open(path));
  const ModelHParams h = read_hparams(*file);
  // Prompts of 300 (two attention stretches), 90 and 40 tokens, then two
  // decode steps each. Alone: each sequence on its own, its prompt in one
  // step. Batched: the prompts in chunks, mixed with the others' decode rows.
  const int32_t prompt[] = {300, 90, 40};
  ModelRig alone(2, GetParam(), file, h, 1);
  for (int32_t s = 0; s < 3; ++s) {
    alone.step({{s, 0, prompt[s]}});
    alone.step({{s, prompt[s], 1}});
    alone.step({{s, prompt[s] + 1, 1}});
  }
  auto batched_run = [&](ModelRig& rig) {
    rig.step({{0, 0, 100}, {2, 0, 40}});
    rig.step({{2, 40, 1}, {0, 100, 37}, {1, 0, 90}});
    rig.step({{1, 90, 1}, {0, 137, 163}, {2, 41, 1}});
    rig.step({{0, 300, 1}, {1, 91, 1}});
    rig.step({{0, 301, 1}});
  };
  ModelRig batched(2, GetParam(), file, h, 2);
  batched_run(batched);
  ModelRig batched_1_thread(1, GetParam(), file, h, 3);
  batched_run(batched_1_thread);
  // Close to the default mode's logits (whose prompts take GEMM on f32
  // activations, not gemv on two 8-bit terms): 1e-6 with an f16 cache; a
  // q8_0 cache turns such rounding differences into a whole int8 step now
  // and then, so there the bound is q8_0's own error, as in
  // onednn_model_test.
  ModelRig usual(2, GetParam(), file, h, 1, false);
  for (int32_t s = 0; s < 3; ++s) {
    usual.step({{s, 0, prompt[s]}});
    usual.step({{s, prompt[s], 1}});
    for (int32_t p : {prompt[s] - 1, prompt[s]}) {
      const std::pair<int32_t, int32_t> key{s, p};
      EXPECT_LE(nmse(alone.rows.at(key), usual.rows.at(key)),
                GetParam() == DType::kQ8_0 ? 2e-3 : 1e-6)
          << "sequence " << s << " position " << p;
    }
  }
  // Positions both have logits for: every 8th, and the decode steps.
  int32_t compared = 0;
  for (const auto& [key, want] : alone.rows) {
    if (batched.rows.count(key) == 0) continue;
    ASSERT_TRUE(same_bits(batched.rows.at(key), want))
        << "sequence " << key.first << " position " << key.second;
    ASSERT_TRUE(same_bits(batched_1_thread.rows.at(key), want))
        << "on 1 thread: sequence " << key.first << " position " << key.second;
    ++compared;
  }
  EXPECT_GE(compared, (300 + 90 + 40) / 8 + 6);
}

INSTANTIATE_TEST_SUITE_P(KVCache, OnednnBatchInvariantModel,
                         ::testing::Values(DType::kF16, DType::kQ8_0),
                         [](const ::testing::TestParamInfo<DType>& param) {
                           return std::string(dtype_name(param.param));
                         });

}  // namespace
}  // namespace duet
