// tiny_model.h — writes small Llama-shaped GGUF models with the project's
// own GGUF writer, for tests that need a model file but not the real one.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "duet/dtype.h"

namespace duet::testing {

struct TinyLlama {
  int32_t n_vocab = 320;  // at least the control tokens (3, llama3 5) and 256 bytes
  int32_t n_embd = 64;
  int32_t n_layers = 2;
  int32_t n_heads = 4;
  int32_t n_kv_heads = 2;
  int32_t n_ff = 128;
  int32_t head_dim = 0;     // 0: n_embd / n_heads; else written as attention.key_length
  bool rope_freqs = false;  // a rope_freqs.weight of factors in [1, 8) (Llama 3.1+)
  int64_t context_length = 256;
  int32_t sliding_window = 0;        // gemma3's attention.sliding_window; 0: context_length / 2
  DType matrix_type = DType::kQ4_1;  // projections and the embedding table
  uint64_t seed = 1;                 // weights are uniform in [-0.5, 0.5)
  // general.architecture and the prefix of its keys: "llama", "qwen2" (adds
  // Q/K/V biases), "qwen3" (per-head q/k norms) or "gemma3" (q/k norms,
  // post-norms, a sliding window (`sliding_window`), RoPE base 1e6 for
  // its global layers); any other name makes a file Duet refuses.
  std::string architecture = "llama";
  // "chatml", or "llama3": Llama 3's control tokens (<|begin_of_text|> bos,
  // <|end_of_text|>, <|start_header_id|>, <|end_header_id|>, <|eot_id|> eos)
  // in place of ChatML's, Meta-Llama-3-8B-Instruct's chat template, and
  // pre-tokenizer "llama-bpe" (unless pre_tokenizer names another).
  std::string chat = "chatml";
  // Ways to make a broken model for error tests.
  std::string pre_tokenizer = "smollm";  // tokenizer.ggml.pre
  std::string omit_tensor;               // a tensor name to leave out
  std::string extra_key;                 // written as `<architecture>.<extra_key>` = 1
  std::string extra_tensor;              // an [n_embd] f32 tensor no model binds
};

// Writes a model of `shape.architecture` to `path`: tied embeddings; a byte-level BPE vocabulary
// (pre-tokenizer "smollm") of
// <|endoftext|>, <|im_start|> (bos), <|im_end|> (eos), the 256 byte tokens
// and letter pairs "ab", "ac", ... with their merges; a ChatML template
// (or Llama 3's tokens and template: shape.chat).
void write_tiny_llama(const std::filesystem::path& path, const TinyLlama& shape = {});

// A fresh temporary folder for one test, removed by the caller.
std::filesystem::path make_temp_dir(const std::string& tag);

}  // namespace duet::testing
