// The reference backend's attention and KV cache against an independent
// softmax-attention written here, and the layout invariants core relies on.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "duet/app/plugin_host.h"
#include "duet/error.h"
#include "duet/quant.h"
#include "random_floats.h"

namespace duet {
namespace {

constexpr int32_t kHeads = 4, kKvHeads = 2, kHeadDim = 32;  // q8_0 blocks need 32

using testdata::random_floats;

// out[i] for queries at positions [first, first + n) of one sequence whose
// keys/values for positions 0.. are rows of `k`, `v`; with window > 0 the
// query at position p weighs only positions p - window < p' <= p (the
// others get weight 0).
std::vector<float> expected_attention(const std::vector<float>& q, const std::vector<float>& k,
                                      const std::vector<float>& v, int32_t first, int32_t n,
                                      float scale, int32_t window = 0) {
  std::vector<float> out(static_cast<size_t>(n * kHeads * kHeadDim));
  for (int32_t i = 0; i < n; ++i) {
    const int32_t pos = first + i;
    for (int32_t h = 0; h < kHeads; ++h) {
      const int32_t g = h / (kHeads / kKvHeads);
      std::vector<double> w(static_cast<size_t>(pos) + 1);
      for (int32_t p = 0; p <= pos; ++p) {
        if (window > 0 && pos - p >= window) continue;  // weight 0
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
          acc += w[static_cast<size_t>(p)] / total *
                 v[static_cast<size_t>((p * kKvHeads + g) * kHeadDim + d)];
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
    attention_ = backend_->create_attention("full", spec_);
  }

  KVCacheSpec kv_spec(int64_t capacity, int32_t block, DType dtype = DType::kF32) const {
    return KVCacheSpec{"contiguous", 2, kKvHeads, kHeadDim, capacity, block, dtype};
  }

  // Runs one step of `n` tokens at positions [first, first+n) for a single
  // sequence stored in `block_table`, on layer 1.
  std::vector<float> step(KVCache& kv, const std::vector<int32_t>& block_table, int32_t first,
                          int32_t n, const std::vector<float>& q, const std::vector<float>& k,
                          const std::vector<float>& v) {
    const int32_t block = kv.spec().block_tokens;
    StepBatch b;
    b.n_tokens = n;
    b.n_prefill_tokens = n > 1 ? n : 0;
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

  static std::vector<float> slice(const std::vector<float>& x, int32_t row_floats, int32_t first,
                                  int32_t n) {
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
  auto q = random_floats(n * kQRow, 1), k = random_floats(n * kKvRow, 2),
       v = random_floats(n * kKvRow, 3);
  auto kv = backend_->create_kv_cache(kv_spec(16, 16));
  auto got = step(*kv, {0}, 0, n, q, k, v);
  auto want = expected_attention(q, k, v, 0, n, spec_.scale);
  for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-6) << "element " << i;
}

TEST_F(ReferenceAttentionTest, AWindowedLayerWeighsOnlyItsLastPositions) {
  const int32_t n = 23, window = 5;
  auto q = random_floats(n * kQRow, 4), k = random_floats(n * kKvRow, 5),
       v = random_floats(n * kKvRow, 6);
  AttentionSpec windowed = spec_;
  windowed.window = window;
  attention_ = backend_->create_attention("full", windowed);
  auto kv = backend_->create_kv_cache(kv_spec(32, 8));
  // A prompt of 20 rows, then three decode rows, over scattered blocks.
  const std::vector<int32_t> table = {3, 0, 2};
  auto got = step(*kv, table, 0, 20, slice(q, kQRow, 0, 20), slice(k, kKvRow, 0, 20),
                  slice(v, kKvRow, 0, 20));
  for (int32_t p = 20; p < n; ++p) {
    auto one = step(*kv, table, p, 1, slice(q, kQRow, p, 1), slice(k, kKvRow, p, 1),
                    slice(v, kKvRow, p, 1));
    got.insert(got.end(), one.begin(), one.end());
  }
  const auto want = expected_attention(q, k, v, 0, n, spec_.scale, window);
  for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-6) << "element " << i;
  // The window changes the answer: the full attention differs past it.
  const auto full = expected_attention(q, k, v, 0, n, spec_.scale);
  EXPECT_GT(std::abs(full.back() - want.back()), 1e-4);
}

TEST_F(ReferenceAttentionTest, PrefillThenDecodeEqualsOneLongerPrefill) {
  const int32_t n = 9;
  auto q = random_floats(n * kQRow, 4), k = random_floats(n * kKvRow, 5),
       v = random_floats(n * kKvRow, 6);
  auto one_shot = backend_->create_kv_cache(kv_spec(16, 16));
  auto all = step(*one_shot, {0}, 0, n, q, k, v);

  auto split = backend_->create_kv_cache(kv_spec(16, 16));
  step(*split, {0}, 0, n - 1, slice(q, kQRow, 0, n - 1), slice(k, kKvRow, 0, n - 1),
       slice(v, kKvRow, 0, n - 1));
  auto last = step(*split, {0}, n - 1, 1, slice(q, kQRow, n - 1, 1), slice(k, kKvRow, n - 1, 1),
                   slice(v, kKvRow, n - 1, 1));
  auto want = slice(all, kQRow, n - 1, 1);
  for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(last[i], want[i], 1e-6);
}

TEST_F(ReferenceAttentionTest, ScatteredBlocksGiveTheSameResultAsOneBlock) {
  const int32_t n = 11;
  auto q = random_floats(n * kQRow, 7), k = random_floats(n * kKvRow, 8),
       v = random_floats(n * kKvRow, 9);
  auto contiguous = backend_->create_kv_cache(kv_spec(16, 16));
  auto paged = backend_->create_kv_cache(kv_spec(16, 4));
  auto a = step(*contiguous, {0}, 0, n, q, k, v);
  auto b = step(*paged, {3, 1, 2}, 0, n, q, k, v);
  EXPECT_EQ(a, b);
}

TEST_F(ReferenceAttentionTest, ExportImportAndBlockCopyMoveTheCache) {
  const int32_t n = 5;
  auto q = random_floats(n * kQRow, 10), k = random_floats(n * kKvRow, 11),
       v = random_floats(n * kKvRow, 12);
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

// f16 and q8_0 caches: attention over exactly the values core's own
// conversions (duet/quant.h) give back for each stored slot row, and the
// stored bytes are those conversions' bytes.
TEST_F(ReferenceAttentionTest, AStoredDTypeAttendsOverTheValuesItRoundsTo) {
  const int32_t n = 9;
  auto q = random_floats(n * kQRow, 13), k = random_floats(n * kKvRow, 14),
       v = random_floats(n * kKvRow, 15);
  k[5] = 40.0f;  // an outlier: its q8_0 block's other values lose precision
  for (DType dtype : {DType::kF16, DType::kQ8_0}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    const auto row_bytes = static_cast<size_t>(*dtype_row_bytes(dtype, kKvRow));
    std::vector<uint8_t> stored(2 * 2 * n * row_bytes);  // [layer][k|v][slot] as exported
    std::vector<float> kr(k.size()), vr(v.size());
    for (int32_t p = 0; p < n; ++p) {
      uint8_t* k_bytes = stored.data() + (2 * n + p) * row_bytes;  // layer 1
      uint8_t* v_bytes = k_bytes + n * row_bytes;
      quantize_row(dtype, k.data() + p * kKvRow, k_bytes, kKvRow);
      quantize_row(dtype, v.data() + p * kKvRow, v_bytes, kKvRow);
      dequantize_row(dtype, k_bytes, kr.data() + p * kKvRow, kKvRow);
      dequantize_row(dtype, v_bytes, vr.data() + p * kKvRow, kKvRow);
    }
    ASSERT_NE(kr, k);  // the rounding is visible, so the test tells the two apart
    auto kv = backend_->create_kv_cache(kv_spec(16, 4, dtype));
    auto prefill = step(*kv, {2, 0, 1}, 0, n - 1, slice(q, kQRow, 0, n - 1),
                        slice(k, kKvRow, 0, n - 1), slice(v, kKvRow, 0, n - 1));
    auto decode = step(*kv, {2, 0, 1}, n - 1, 1, slice(q, kQRow, n - 1, 1),
                       slice(k, kKvRow, n - 1, 1), slice(v, kKvRow, n - 1, 1));
    prefill.insert(prefill.end(), decode.begin(), decode.end());
    auto want = expected_attention(q, kr, vr, 0, n, spec_.scale);
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(prefill[i], want[i], 1e-6) << "element " << i;

    // Slots in table order {2, 0, 1} of 4: position p lives in slot ((2, 0, 1)[p / 4]) * 4 + p % 4.
    std::vector<uint8_t> bytes;
    kv->export_slots(12, bytes);
    ASSERT_EQ(bytes.size(), 2 * 2 * 12 * row_bytes);
    for (int32_t p = 0; p < n; ++p) {
      const int32_t slot = std::vector<int32_t>{2, 0, 1}[static_cast<size_t>(p / 4)] * 4 + p % 4;
      for (int kv_part = 0; kv_part < 2; ++kv_part) {
        const uint8_t* got = bytes.data() + ((2 + kv_part) * 12 + slot) * row_bytes;
        const uint8_t* expect = stored.data() + ((2 + kv_part) * n + p) * row_bytes;
        EXPECT_TRUE(std::equal(got, got + row_bytes, expect))
            << "position " << p << (kv_part ? " v" : " k");
      }
    }
  }
}

TEST_F(ReferenceAttentionTest, RefusesCacheLayoutsItCannotReadWithReasons) {
  Support s = attention_->check(kv_spec(16, 16, DType::kBF16));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.reasons[0].find("bf16"), std::string::npos) << s.reasons[0];

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
            "backend 'demo' holds K and V as f32 or f16, not bf16; set "
            "components.kv_cache.dtype to f32 or f16");
  EXPECT_NE(s.reasons[2].find("capacity 100, block 30"), std::string::npos) << s.reasons[2];

  spec = KVCacheSpec{"contiguous", 2, 3, 64, 100, 25, DType::kF16};
  EXPECT_TRUE(check_contiguous_kv_cache(spec, "demo", {DType::kF32, DType::kF16}).ok());
  spec.n_layers = 0;
  EXPECT_FALSE(check_contiguous_kv_cache(spec, "demo", {DType::kF32, DType::kF16}).ok());

  // q8_0 blocks of 32 must not span two heads.
  spec = KVCacheSpec{"contiguous", 2, 3, 48, 100, 25, DType::kQ8_0};
  const Support q8 = check_contiguous_kv_cache(spec, "demo", {DType::kQ8_0});
  ASSERT_EQ(q8.reasons.size(), 1u);
  EXPECT_EQ(q8.reasons[0],
            "a q8_0 KV cache stores blocks of 32 elements, which head_dim 48 does not divide; set "
            "components.kv_cache.dtype to f16 or f32");
  spec.head_dim = 64;
  EXPECT_TRUE(check_contiguous_kv_cache(spec, "demo", {DType::kQ8_0}).ok());
}

}  // namespace
}  // namespace duet
