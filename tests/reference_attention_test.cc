// The reference backend's attention and KV cache against an independent
// softmax-attention written here, and the layout invariants core relies on.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>

#include "duet/error.h"
#include "duet/plugin_host.h"

namespace duet {
namespace {

constexpr int32_t kHeads = 4, kKvHeads = 2, kHeadDim = 8;

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

// out[i] for queries at positions [first, first + n) of one sequence whose
// keys/values for positions 0.. are rows of `k`, `v`.
std::vector<float> expected_attention(const std::vector<float>& q, const std::vector<float>& k,
                                      const std::vector<float>& v, int32_t first, int32_t n, float scale) {
  std::vector<float> out(static_cast<size_t>(n * kHeads * kHeadDim));
  for (int32_t i = 0; i < n; ++i) {
    const int32_t pos = first + i;
    for (int32_t h = 0; h < kHeads; ++h) {
      const int32_t g = h / (kHeads / kKvHeads);
      std::vector<double> w(static_cast<size_t>(pos) + 1);
      for (int32_t p = 0; p <= pos; ++p) {
        double dot = 0;
        for (int32_t d = 0; d < kHeadDim; ++d) {
          dot += q[static_cast<size_t>((i * kHeads + h) * kHeadDim + d)] *
                 k[static_cast<size_t>((p * kKvHeads + g) * kHeadDim + d)];
        }
        w[static_cast<size_t>(p)] = std::exp(dot * scale);
      }
      const double total = std::accumulate(w.begin(), w.end(), 0.0);
      for (int32_t d = 0; d < kHeadDim; ++d) {
        double acc = 0;
        for (int32_t p = 0; p <= pos; ++p) {
          acc += w[static_cast<size_t>(p)] / total * v[static_cast<size_t>((p * kKvHeads + g) * kHeadDim + d)];
        }
        out[static_cast<size_t>((i * kHeads + h) * kHeadDim + d)] = static_cast<float>(acc);
      }
    }
  }
  return out;
}

class ReferenceAttentionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PluginRecord r = host_.load(std::string(DUET_BUILD_DIR) + "/plugins/duet-reference.so");
    ASSERT_TRUE(r.loaded) << r.refusal;
    backend_ = host_.create_backend("reference", Options("backend.options"));
    attention_ = backend_->create_attention("naive", spec_);
  }

  KVCacheSpec kv_spec(int64_t capacity, int32_t block) const {
    return KVCacheSpec{"contiguous", 2, kKvHeads, kHeadDim, capacity, block, DType::kF32};
  }

  // Runs one step of `n` tokens at positions [first, first+n) for a single
  // sequence stored in `block_table`, on layer 1.
  std::vector<float> step(KVCache& kv, const std::vector<int32_t>& block_table, int32_t first, int32_t n,
                          const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v) {
    const int32_t block = kv.spec().block_tokens;
    StepBatch b;
    b.n_tokens = n;
    b.n_prefill_tokens = n > 1 ? n : 0;
    b.n_decode_tokens = n > 1 ? 0 : 1;
    for (int32_t i = 0; i < n; ++i) {
      const int32_t p = first + i;
      b.positions.push_back(p);
      b.slot_mapping.push_back(block_table[static_cast<size_t>(p / block)] * block + p % block);
    }
    b.sequences.push_back(SequenceStep{0, 0, n, first + n, block_table});
    auto rows = [](std::vector<float>& data, int32_t heads, int32_t count) {
      return TensorView{data.data(), DType::kF32, Shape{count, heads, kHeadDim}};
    };
    std::vector<float> qc = q, kc = k, vc = v, out(q.size());
    attention_->forward(1, b, rows(qc, kHeads, n), rows(kc, kKvHeads, n), rows(vc, kKvHeads, n), kv,
                        rows(out, kHeads, n));
    return out;
  }

  static std::vector<float> slice(const std::vector<float>& x, int32_t row_floats, int32_t first, int32_t n) {
    return {x.begin() + first * row_floats, x.begin() + (first + n) * row_floats};
  }

  PluginHost host_;
  std::shared_ptr<Backend> backend_;
  AttentionSpec spec_{kHeads, kKvHeads, kHeadDim, 1.0f / std::sqrt(float{kHeadDim})};
  std::unique_ptr<Attention> attention_;
};

constexpr int32_t kQRow = kHeads * kHeadDim, kKvRow = kKvHeads * kHeadDim;

TEST_F(ReferenceAttentionTest, PrefillMatchesTheSoftmaxFormulaWithACausalMask) {
  const int32_t n = 7;
  auto q = random_floats(n * kQRow, 1), k = random_floats(n * kKvRow, 2), v = random_floats(n * kKvRow, 3);
  auto kv = backend_->create_kv_cache(kv_spec(16, 16));
  auto got = step(*kv, {0}, 0, n, q, k, v);
  auto want = expected_attention(q, k, v, 0, n, spec_.scale);
  for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-6) << "element " << i;
}

TEST_F(ReferenceAttentionTest, PrefillThenDecodeEqualsOneLongerPrefill) {
  const int32_t n = 9;
  auto q = random_floats(n * kQRow, 4), k = random_floats(n * kKvRow, 5), v = random_floats(n * kKvRow, 6);
  auto one_shot = backend_->create_kv_cache(kv_spec(16, 16));
  auto all = step(*one_shot, {0}, 0, n, q, k, v);

  auto split = backend_->create_kv_cache(kv_spec(16, 16));
  step(*split, {0}, 0, n - 1, slice(q, kQRow, 0, n - 1), slice(k, kKvRow, 0, n - 1), slice(v, kKvRow, 0, n - 1));
  auto last = step(*split, {0}, n - 1, 1, slice(q, kQRow, n - 1, 1), slice(k, kKvRow, n - 1, 1),
                   slice(v, kKvRow, n - 1, 1));
  auto want = slice(all, kQRow, n - 1, 1);
  for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(last[i], want[i], 1e-6);
}

TEST_F(ReferenceAttentionTest, ScatteredBlocksGiveTheSameResultAsOneBlock) {
  const int32_t n = 11;
  auto q = random_floats(n * kQRow, 7), k = random_floats(n * kKvRow, 8), v = random_floats(n * kKvRow, 9);
  auto contiguous = backend_->create_kv_cache(kv_spec(16, 16));
  auto paged = backend_->create_kv_cache(kv_spec(16, 4));
  auto a = step(*contiguous, {0}, 0, n, q, k, v);
  auto b = step(*paged, {3, 1, 2}, 0, n, q, k, v);
  EXPECT_EQ(a, b);
}

TEST_F(ReferenceAttentionTest, ExportImportAndBlockCopyMoveTheCache) {
  const int32_t n = 5;
  auto q = random_floats(n * kQRow, 10), k = random_floats(n * kKvRow, 11), v = random_floats(n * kKvRow, 12);
  auto source = backend_->create_kv_cache(kv_spec(8, 4));
  step(*source, {0}, 0, n - 1, slice(q, kQRow, 0, n - 1), slice(k, kKvRow, 0, n - 1),
                     slice(v, kKvRow, 0, n - 1));
  std::vector<uint8_t> bytes;
  source->export_slots(n - 1, bytes);
  EXPECT_EQ(bytes.size(), 2u * 2 * (n - 1) * kKvRow * sizeof(float));

  auto target = backend_->create_kv_cache(kv_spec(8, 4));
  target->import_slots(n - 1, bytes);
  auto next = [&](KVCache& kv, std::vector<int32_t> table) {
    return step(kv, table, n - 1, 1, slice(q, kQRow, n - 1, 1), slice(k, kKvRow, n - 1, 1),
                slice(v, kKvRow, n - 1, 1));
  };
  auto from_source = next(*source, {0, 1});
  EXPECT_EQ(next(*target, {0, 1}), from_source);

  // Copying blocks {0, 1} to {2, 3} moves the sequence with its cache.
  auto wide = backend_->create_kv_cache(kv_spec(16, 4));
  EXPECT_THROW(wide->import_slots(n, bytes), Error);  // a size mismatch is rejected
  wide->import_slots(n - 1, bytes);
  wide->copy_blocks(0, 2, 2);
  EXPECT_EQ(next(*wide, {2, 3}), from_source);
}

TEST_F(ReferenceAttentionTest, RefusesCacheLayoutsItCannotReadWithReasons) {
  KVCacheSpec f16 = kv_spec(16, 16);
  f16.dtype = DType::kF16;
  Support s = attention_->check(f16);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.reasons[0].find("f16"), std::string::npos) << s.reasons[0];

  KVCacheSpec wrong_heads = kv_spec(16, 16);
  wrong_heads.n_kv_heads = 3;
  EXPECT_FALSE(attention_->check(wrong_heads).ok());

  KVCacheSpec bad_block = kv_spec(16, 5);
  EXPECT_FALSE(backend_->check_kv_cache(bad_block).ok());
  EXPECT_TRUE(backend_->check_kv_cache(kv_spec(16, 4)).ok());
}

// The core helper behind every backend's check_kv_cache: one reason per
// problem, each naming the value and the key that fixes it.
TEST(ContiguousKVCacheCheck, NamesEachProblemAndItsFix) {
  KVCacheSpec spec{"paged", 2, 3, 64, 100, 30, DType::kBF16};
  const Support s = check_contiguous_kv_cache(spec, "demo", {DType::kF32, DType::kF16});
  ASSERT_EQ(s.reasons.size(), 3u);
  EXPECT_EQ(s.reasons[0],
            "backend 'demo' stores KV caches as 'contiguous' only, not 'paged'; set "
            "components.kv_cache.impl to contiguous");
  EXPECT_EQ(s.reasons[1],
            "backend 'demo' stores K and V as f32 or f16, not bf16; set "
            "components.kv_cache.dtype to f32 or f16");
  EXPECT_NE(s.reasons[2].find("capacity 100, block 30"), std::string::npos) << s.reasons[2];

  spec = KVCacheSpec{"contiguous", 2, 3, 64, 100, 25, DType::kF16};
  EXPECT_TRUE(check_contiguous_kv_cache(spec, "demo", {DType::kF32, DType::kF16}).ok());
  spec.n_layers = 0;
  EXPECT_FALSE(check_contiguous_kv_cache(spec, "demo", {DType::kF32, DType::kF16}).ok());
}

}  // namespace
}  // namespace duet
