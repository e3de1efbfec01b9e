// The named shapes of core/random_model/random_llama.h (duet_make_random_model --shape):
// llama-1b is Llama-3.2-1B's body on SmolLM2's vocabulary, about 1.07 G
// weights, with the layer scales narrowed for its width; unknown names are
// refused. A K-quant file stores rows that are not whole 256-element
// blocks in llama-quantize's fallback type.
#include "random_llama.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "duet/app/gguf.h"

namespace duet::testing {
namespace {

int64_t weights(const RandomLlama& s) {
  const int64_t head_dim = s.n_embd / s.n_heads;
  const int64_t kv = int64_t{s.n_kv_heads} * head_dim;
  const int64_t layer = 2 * int64_t{s.n_embd} * s.n_embd + 2 * kv * s.n_embd +
                        3 * int64_t{s.n_embd} * s.n_ff + 2 * int64_t{s.n_embd};
  return int64_t{s.n_vocab} * s.n_embd + s.n_layers * layer + s.n_embd;
}

TEST(RandomLlamaShape, SmolLM2IsTheDefault) {
  const auto s = random_llama_shape("smollm2-135m");
  ASSERT_TRUE(s.has_value());
  const RandomLlama d;
  EXPECT_EQ(s->n_embd, d.n_embd);
  EXPECT_EQ(s->n_layers, d.n_layers);
  EXPECT_EQ(s->qk_scale, d.qk_scale);
  EXPECT_NEAR(static_cast<double>(weights(*s)), 134.5e6, 1e6);
}

TEST(RandomLlamaShape, Llama1BIsLlama32sBodyOnSmolLM2sVocabulary) {
  const auto s = random_llama_shape("llama-1b");
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->n_vocab, 49152);
  EXPECT_EQ(s->n_embd, 2048);
  EXPECT_EQ(s->n_layers, 16);
  EXPECT_EQ(s->n_heads, 32);
  EXPECT_EQ(s->n_kv_heads, 8);
  EXPECT_EQ(s->n_ff, 8192);
  EXPECT_EQ(s->n_embd / s->n_heads, 64);
  EXPECT_NEAR(static_cast<double>(weights(*s)), 1.07e9, 0.01e9);
  const RandomLlama d;
  EXPECT_FLOAT_EQ(s->vo_scale, d.vo_scale * std::sqrt(576.0f / 2048.0f));
}

TEST(RandomLlamaShape, UnknownNamesAreRefused) {
  EXPECT_FALSE(random_llama_shape("llama-8b").has_value());
  EXPECT_FALSE(random_llama_shape("").has_value());
}

// SmolLM2's rows of 576 are not whole K-quant blocks; its ffn_down rows of
// 1,536 are. The others fall back as llama-quantize's do: q4_k to q5_0.
TEST(RandomLlamaTypes, RowsThatAreNotWholeKQuantBlocksFallBack) {
  RandomLlama s;
  s.n_layers = 1;
  s.matrix_type = DType::kQ4_K;
  const std::filesystem::path path = std::filesystem::temp_directory_path() /
                                     ("duet-random-q4_k-" + std::to_string(getpid()) + ".gguf");
  write_random_llama(path, s);
  {
    const GgufFile file = GgufFile::open(path);
    EXPECT_EQ(file.tensor("blk.0.ffn_down.weight").dtype, DType::kQ4_K);
    for (const char* name : {"token_embd.weight", "blk.0.attn_q.weight", "blk.0.ffn_up.weight"}) {
      EXPECT_EQ(file.tensor(name).dtype, DType::kQ5_0) << name;
    }
  }
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace duet::testing
