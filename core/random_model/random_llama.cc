#include "random_llama.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "duet/app/gguf.h"
#include "duet/app/quantize.h"
#include "duet/app/tensor_names.h"
#include "duet/quant.h"
#include "duet/rng.h"
#include "gpt2_byte_symbols.h"

namespace duet::testing {
namespace {

constexpr int32_t kControlTokens = 3;  // <|endoftext|>, <|im_start|>, <|im_end|>

// "aa".."zz" (with merges), then "aaa".., then "aaaa".. until n_vocab.
void write_vocabulary(GgufWriter& w, int32_t n_vocab) {
  std::vector<std::string> tokens = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  std::vector<int32_t> types(3, 3);
  std::vector<std::string> merges;
  for (const auto& symbol : testdata::byte_symbols()) tokens.push_back(symbol);
  types.resize(tokens.size(), 1);
  for (int letters = 2; static_cast<int32_t>(tokens.size()) < n_vocab; ++letters) {
    std::string t(static_cast<size_t>(letters), 'a');
    while (static_cast<int32_t>(tokens.size()) < n_vocab) {
      tokens.push_back(t);
      types.push_back(1);
      if (letters == 2) merges.push_back(std::string{t[0], ' ', t[1]});
      // Next string in lexicographic order; stop after "zz...z".
      int i = letters - 1;
      while (i >= 0 && t[static_cast<size_t>(i)] == 'z') t[static_cast<size_t>(i--)] = 'a';
      if (i < 0) break;
      ++t[static_cast<size_t>(i)];
    }
  }
  tokens.resize(static_cast<size_t>(n_vocab));
  types.resize(static_cast<size_t>(n_vocab));
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", "smollm");
  w.set_string_array("tokenizer.ggml.tokens", tokens);
  w.set_int32_array("tokenizer.ggml.token_type", types);
  w.set_string_array("tokenizer.ggml.merges", merges);
  w.set_uint32("tokenizer.ggml.bos_token_id", 1);
  w.set_uint32("tokenizer.ggml.eos_token_id", 2);
  w.set_string("tokenizer.chat_template",
               "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
               "message['content'] + "
               "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ "
               "'<|im_start|>assistant\\n' }}"
               "{% endif %}");
}

// Runs body(row) for every row in [0, rows) on all hardware threads.
template <typename Body>
void parallel_rows(int64_t rows, Body body) {
  const int64_t threads = std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, 64);
  std::vector<std::thread> pool;
  for (int64_t t = 0; t < threads; ++t) {
    pool.emplace_back([=] {
      for (int64_t r = t; r < rows; r += threads) body(r);
    });
  }
  for (auto& th : pool) th.join();
}

class TensorMaker {
 public:
  TensorMaker(GgufWriter& w, uint64_t seed, DType matrix_type)
      : w_(w), seed_(seed), type_(matrix_type) {}

  // A [rows, cols] matrix whose row r holds the random values of `source`
  // row source_row(r) times `scale` (source_row(r) < 0: zeros). Each source
  // is a stream of uniform values in [-0.5, 0.5) keyed by (seed, source).
  template <typename SourceRow>
  void matrix(const std::string& name, int64_t rows, int64_t cols, uint64_t source, float scale,
              SourceRow source_row) {
    const DType type = row_type(cols);
    const uint64_t row_bytes = *dtype_row_bytes(type, static_cast<uint64_t>(cols));
    std::vector<uint8_t> bytes(row_bytes * static_cast<uint64_t>(rows));
    parallel_rows(rows, [&](int64_t r) {
      std::vector<float> values(static_cast<size_t>(cols), 0.0f);
      const int64_t from = source_row(r);
      for (int64_t c = 0; from >= 0 && c < cols; ++c) {
        const uint64_t index = static_cast<uint64_t>(from * cols + c);
        values[static_cast<size_t>(c)] =
            scale * static_cast<float>(counter_uniform(seed_, source, index, 0) - 0.5);
      }
      quantize_row(type, values.data(), bytes.data() + static_cast<uint64_t>(r) * row_bytes, cols);
    });
    w_.add_tensor(name, type, {rows, cols}, bytes.data(), bytes.size());
  }

  // The matrix type, or for rows that are not a whole number of its blocks
  // (a K-quant's 256 elements against SmolLM2's 576) the type llama.cpp's
  // quantizer falls back to (q5_0, q5_1, q8_0); f16 if none fits.
  DType row_type(int64_t cols) const { return type_for_rows(type_, cols).value_or(DType::kF16); }

  void matrix(const std::string& name, int64_t rows, int64_t cols, float scale) {
    matrix(name, rows, cols, next_source_++, scale, [](int64_t r) { return r; });
  }

  // An f32 vector of uniform values in ±scale / 2 (a bias).
  void vector(const std::string& name, int64_t n, float scale) {
    std::vector<float> values(static_cast<size_t>(n));
    const uint64_t source = next_source_++;
    for (int64_t i = 0; i < n; ++i) {
      values[static_cast<size_t>(i)] =
          scale *
          static_cast<float>(counter_uniform(seed_, source, static_cast<uint64_t>(i), 0) - 0.5);
    }
    w_.add_tensor(name, DType::kF32, {n}, values.data(), values.size() * sizeof(float));
  }

  void ones(const std::string& name, int64_t n) {
    const std::vector<float> values(static_cast<size_t>(n), 1.0f);
    w_.add_tensor(name, DType::kF32, {n}, values.data(), values.size() * sizeof(float));
  }

 private:
  GgufWriter& w_;
  uint64_t seed_;
  DType type_;
  uint64_t next_source_ = 1;  // source 0 is the embedding table
};

}  // namespace

std::optional<RandomLlama> random_llama_shape(std::string_view name) {
  RandomLlama shape;
  if (name == "smollm2-135m") return shape;
  if (name != "llama-1b") return std::nullopt;
  shape.n_embd = 2048;
  shape.n_layers = 16;
  shape.n_heads = 32;
  shape.n_kv_heads = 8;
  shape.n_ff = 8192;
  const float narrower = std::sqrt(576.0f / 2048.0f);
  shape.qk_scale *= narrower;
  shape.vo_scale *= narrower;
  shape.ffn_scale *= narrower;
  return shape;
}

bool random_llama_architecture(std::string_view name) {
  return name == "llama" || name == "qwen2" || name == "qwen3" || name == "gemma3";
}

int32_t random_llama_next(int32_t token, int32_t n_vocab) {
  const int64_t span = n_vocab - kControlTokens;
  // 7919 is prime and does not divide 49149 (= 3² · 43 · 127), so for
  // SmolLM2's vocabulary this is a permutation; other sizes may repeat
  // targets, which only makes some rows unused.
  const int64_t i = std::max<int64_t>(token - kControlTokens, 0);
  return static_cast<int32_t>(kControlTokens + (i * 7919 + 1) % span);
}

void write_random_llama(const std::filesystem::path& path, const RandomLlama& s) {
  GgufWriter w;
  const std::string a = s.architecture + ".";
  const int64_t head_dim = int64_t{s.n_embd} / s.n_heads;
  w.set_string("general.architecture", s.architecture);
  w.set_string("general.name", "random-" + s.architecture);
  w.set_uint32(a + "context_length", static_cast<uint32_t>(s.context_length));
  w.set_uint32(a + "embedding_length", static_cast<uint32_t>(s.n_embd));
  w.set_uint32(a + "block_count", static_cast<uint32_t>(s.n_layers));
  w.set_uint32(a + "feed_forward_length", static_cast<uint32_t>(s.n_ff));
  w.set_uint32(a + "attention.head_count", static_cast<uint32_t>(s.n_heads));
  w.set_uint32(a + "attention.head_count_kv", static_cast<uint32_t>(s.n_kv_heads));
  const bool qk_norm = s.architecture == "qwen3" || s.architecture == "gemma3";
  const bool bias = s.architecture == "qwen2";
  const bool gemma3 = s.architecture == "gemma3";
  if (qk_norm) {
    w.set_uint32(a + "attention.key_length", static_cast<uint32_t>(head_dim));
    w.set_uint32(a + "attention.value_length", static_cast<uint32_t>(head_dim));
  }
  w.set_float32(a + "rope.freq_base", 100000.0f);
  w.set_float32(a + "attention.layer_norm_rms_epsilon", 1e-5f);
  if (gemma3) w.set_uint32(a + "attention.sliding_window", 512);
  write_vocabulary(w, s.n_vocab);

  const int64_t kv_dim = head_dim * s.n_kv_heads;
  using R = TensorRole;
  TensorMaker t(w, s.seed, s.matrix_type);
  t.matrix(tensor_name(R::kTokenEmbd), s.n_vocab, s.n_embd, 0, 1.0f, [](int64_t r) { return r; });
  // Row next(c) of the LM head is embedding row c (see the header).
  std::vector<int64_t> from(static_cast<size_t>(s.n_vocab), -1);
  for (int32_t c = kControlTokens; c < s.n_vocab; ++c)
    from[static_cast<size_t>(random_llama_next(c, s.n_vocab))] = c;
  t.matrix(tensor_name(R::kOutput), s.n_vocab, s.n_embd, 0, 1.0f,
           [&](int64_t r) { return from[static_cast<size_t>(r)]; });
  t.ones(tensor_name(R::kOutputNorm), s.n_embd);
  for (int32_t l = 0; l < s.n_layers; ++l) {
    t.ones(tensor_name(R::kAttnNorm, l), s.n_embd);
    t.matrix(tensor_name(R::kAttnQ, l), s.n_embd, s.n_embd, s.qk_scale);
    t.matrix(tensor_name(R::kAttnK, l), kv_dim, s.n_embd, s.qk_scale);
    t.matrix(tensor_name(R::kAttnV, l), kv_dim, s.n_embd, s.vo_scale);
    if (bias) {
      t.vector(tensor_name(R::kAttnQBias, l), s.n_embd, s.qk_scale);
      t.vector(tensor_name(R::kAttnKBias, l), kv_dim, s.qk_scale);
      t.vector(tensor_name(R::kAttnVBias, l), kv_dim, s.vo_scale);
    }
    if (qk_norm) {
      t.ones(tensor_name(R::kAttnQNorm, l), head_dim);
      t.ones(tensor_name(R::kAttnKNorm, l), head_dim);
    }
    t.matrix(tensor_name(R::kAttnOutput, l), s.n_embd, s.n_embd, s.vo_scale);
    if (gemma3) t.ones(tensor_name(R::kAttnPostNorm, l), s.n_embd);
    t.ones(tensor_name(R::kFfnNorm, l), s.n_embd);
    t.matrix(tensor_name(R::kFfnGate, l), s.n_ff, s.n_embd, s.ffn_scale);
    t.matrix(tensor_name(R::kFfnUp, l), s.n_ff, s.n_embd, s.ffn_scale);
    t.matrix(tensor_name(R::kFfnDown, l), s.n_embd, s.n_ff, s.ffn_scale);
    if (gemma3) t.ones(tensor_name(R::kFfnPostNorm, l), s.n_embd);
  }
  w.write(path);
}

}  // namespace duet::testing
