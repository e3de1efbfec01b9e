#include "tiny_model.h"

#include <unistd.h>

#include <string>
#include <vector>

#include "duet/app/gguf.h"
#include "duet/app/tensor_names.h"
#include "duet/quant.h"
#include "duet/rng.h"
#include "gpt2_byte_symbols.h"

namespace duet::testing {
namespace {

struct TinyVocab {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;  // 1 normal, 3 control
  std::vector<std::string> merges;
};

// The control tokens, the 256 byte tokens, then merged tokens built from
// pairs of lower-case letters ("ab", "ac", ...) until n_vocab is reached.
TinyVocab tiny_vocab(int32_t n_vocab, const std::vector<std::string>& control) {
  TinyVocab v;
  for (const std::string& special : control) {
    v.tokens.push_back(special);
    v.types.push_back(3);
  }
  for (const auto& symbol : testdata::byte_symbols()) {
    v.tokens.push_back(symbol);
    v.types.push_back(1);
  }
  for (char a = 'a'; a <= 'z' && static_cast<int32_t>(v.tokens.size()) < n_vocab; ++a) {
    for (char b = 'a'; b <= 'z' && static_cast<int32_t>(v.tokens.size()) < n_vocab; ++b) {
      v.tokens.push_back(std::string{a, b});
      v.types.push_back(1);
      v.merges.push_back(std::string{a, ' ', b});
    }
  }
  return v;
}

class TensorMaker {
 public:
  TensorMaker(GgufWriter& w, uint64_t seed, std::string omit)
      : w_(w), seed_(seed), omit_(std::move(omit)) {}

  // Values uniform in offset ± width / 2.
  void add(const std::string& name, DType type, Shape shape, float offset = 0.0f,
           float width = 1.0f) {
    if (name == omit_) return;
    std::vector<float> values(static_cast<size_t>(shape.elements()));
    for (size_t i = 0; i < values.size(); ++i) {
      values[i] =
          offset + width * static_cast<float>(counter_uniform(seed_, tensor_index_, i, 0) - 0.5);
    }
    ++tensor_index_;
    std::vector<uint8_t> bytes(*dtype_row_bytes(type, static_cast<uint64_t>(shape.innermost())) *
                               static_cast<size_t>(shape.rows()));
    const uint64_t row_bytes = *dtype_row_bytes(type, static_cast<uint64_t>(shape.innermost()));
    for (int64_t r = 0; r < shape.rows(); ++r) {
      quantize_row(type, values.data() + r * shape.innermost(),
                   bytes.data() + static_cast<uint64_t>(r) * row_bytes, shape.innermost());
    }
    w_.add_tensor(name, type, shape, bytes.data(), bytes.size());
  }

 private:
  GgufWriter& w_;
  uint64_t seed_;
  std::string omit_;
  uint64_t tensor_index_ = 0;
};

}  // namespace

void write_tiny_llama(const std::filesystem::path& path, const TinyLlama& s) {
  GgufWriter w;
  w.set_string("general.architecture", s.architecture);
  w.set_string("general.name", "tiny-llama-test");
  const std::string a = s.architecture + ".";
  w.set_uint32(a + "context_length", static_cast<uint32_t>(s.context_length));
  w.set_uint32(a + "embedding_length", static_cast<uint32_t>(s.n_embd));
  w.set_uint32(a + "block_count", static_cast<uint32_t>(s.n_layers));
  w.set_uint32(a + "feed_forward_length", static_cast<uint32_t>(s.n_ff));
  w.set_uint32(a + "attention.head_count", static_cast<uint32_t>(s.n_heads));
  w.set_uint32(a + "attention.head_count_kv", static_cast<uint32_t>(s.n_kv_heads));
  if (s.head_dim != 0) {
    w.set_uint32(a + "attention.key_length", static_cast<uint32_t>(s.head_dim));
    w.set_uint32(a + "attention.value_length", static_cast<uint32_t>(s.head_dim));
  }
  w.set_float32(a + "rope.freq_base", s.architecture == "gemma3" ? 1e6f : 10000.0f);
  w.set_float32(a + "attention.layer_norm_rms_epsilon", 1e-5f);
  if (s.architecture == "gemma3") {
    w.set_uint32(
        a + "attention.sliding_window",
        static_cast<uint32_t>(s.sliding_window > 0 ? s.sliding_window : s.context_length / 2));
  }
  if (!s.extra_key.empty()) w.set_uint32(a + s.extra_key, 1);
  const bool llama3 = s.chat == "llama3";
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre",
               llama3 && s.pre_tokenizer == "smollm" ? "llama-bpe" : s.pre_tokenizer);
  const TinyVocab vocab =
      llama3 ? tiny_vocab(s.n_vocab, {"<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                                      "<|end_header_id|>", "<|eot_id|>"})
             : tiny_vocab(s.n_vocab, {"<|endoftext|>", "<|im_start|>", "<|im_end|>"});
  w.set_string_array("tokenizer.ggml.tokens", vocab.tokens);
  w.set_int32_array("tokenizer.ggml.token_type", vocab.types);
  w.set_string_array("tokenizer.ggml.merges", vocab.merges);
  if (llama3) {
    w.set_uint32("tokenizer.ggml.bos_token_id", 0);
    w.set_uint32("tokenizer.ggml.eos_token_id", 4);
    w.set_string("tokenizer.chat_template",
                 "{% set loop_messages = messages %}{% for message in loop_messages %}{% set "
                 "content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ "
                 "message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set "
                 "content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if "
                 "add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' "
                 "}}{% endif %}");
  } else {
    w.set_uint32("tokenizer.ggml.bos_token_id", 1);
    w.set_uint32("tokenizer.ggml.eos_token_id", 2);
    w.set_string("tokenizer.chat_template",
                 "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
                 "message['content'] + "
                 "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ "
                 "'<|im_start|>assistant\\n' }}"
                 "{% endif %}");
  }

  const int64_t head_dim = s.head_dim != 0 ? s.head_dim : s.n_embd / s.n_heads;
  const int64_t q_dim = head_dim * s.n_heads;
  const int64_t kv_dim = head_dim * s.n_kv_heads;
  const bool qk_norm = s.architecture == "qwen3" || s.architecture == "gemma3";
  const bool bias = s.architecture == "qwen2";
  const bool post_norms = s.architecture == "gemma3";
  TensorMaker t(w, s.seed, s.omit_tensor);
  using R = TensorRole;
  t.add(tensor_name(R::kTokenEmbd), s.matrix_type, {s.n_vocab, s.n_embd});
  t.add(tensor_name(R::kOutputNorm), DType::kF32, {s.n_embd}, 1.0f);
  if (s.rope_freqs) t.add(tensor_name(R::kRopeFreqs), DType::kF32, {head_dim / 2}, 4.5f, 7.0f);
  for (int32_t l = 0; l < s.n_layers; ++l) {
    t.add(tensor_name(R::kAttnNorm, l), DType::kF32, {s.n_embd}, 1.0f);
    t.add(tensor_name(R::kAttnQ, l), s.matrix_type, {q_dim, s.n_embd});
    t.add(tensor_name(R::kAttnK, l), s.matrix_type, {kv_dim, s.n_embd});
    t.add(tensor_name(R::kAttnV, l), s.matrix_type, {kv_dim, s.n_embd});
    if (bias) {
      t.add(tensor_name(R::kAttnQBias, l), DType::kF32, {q_dim});
      t.add(tensor_name(R::kAttnKBias, l), DType::kF32, {kv_dim});
      t.add(tensor_name(R::kAttnVBias, l), DType::kF32, {kv_dim});
    }
    if (qk_norm) {
      t.add(tensor_name(R::kAttnQNorm, l), DType::kF32, {head_dim}, 1.0f);
      t.add(tensor_name(R::kAttnKNorm, l), DType::kF32, {head_dim}, 1.0f);
    }
    t.add(tensor_name(R::kAttnOutput, l), s.matrix_type, {s.n_embd, q_dim});
    if (post_norms) t.add(tensor_name(R::kAttnPostNorm, l), DType::kF32, {s.n_embd}, 1.0f);
    t.add(tensor_name(R::kFfnNorm, l), DType::kF32, {s.n_embd}, 1.0f);
    t.add(tensor_name(R::kFfnGate, l), s.matrix_type, {s.n_ff, s.n_embd});
    t.add(tensor_name(R::kFfnUp, l), s.matrix_type, {s.n_ff, s.n_embd});
    t.add(tensor_name(R::kFfnDown, l), s.matrix_type, {s.n_embd, s.n_ff});
    if (post_norms) t.add(tensor_name(R::kFfnPostNorm, l), DType::kF32, {s.n_embd}, 1.0f);
  }
  if (!s.extra_tensor.empty()) t.add(s.extra_tensor, DType::kF32, {s.n_embd}, 1.0f);
  w.write(path);
}

std::filesystem::path make_temp_dir(const std::string& tag) {
  auto dir =
      std::filesystem::temp_directory_path() / ("duet-" + tag + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace duet::testing
