// random_llama.h — full-size Llama models with random weights, written with
// Duet's own GGUF writer: something to benchmark and to compare backends on
// when the real weights are not at hand (a GPU machine without network).
//
// Random weights make a chaotic model: after 30 layers a rounding error of
// 1e-3 can decide the argmax, and greedy tokens would differ between two
// correct backends. So the weights are shaped to make the next token
// clear-cut while every layer still matters:
//   - output.weight row next(c) is token_embd row c, for a fixed permutation
//     `next` of the non-control tokens: with quiet layers the hidden state
//     stays close to the current token's embedding and the LM head gives
//     next(c) a logit far above every other (control tokens get zero rows
//     and are never picked, so generation never stops early);
//   - the layers' weights are scaled down (see RandomLlama) so their
//     contribution is a fair fraction of the hidden state — large enough
//     that a wrong attention or FFN moves the logits well past the
//     conformance threshold, small enough not to blur the argmax.
// The vocabulary is byte-level BPE like tiny_model.h's, padded to n_vocab
// with three- and four-letter tokens.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "duet/dtype.h"

namespace duet::testing {

struct RandomLlama {
  // general.architecture: "llama", "qwen2" (random Q/K/V biases), "qwen3"
  // (per-head q/k norms of ones, attention.key_length written) or "gemma3"
  // (q/k norms and post-norms of ones, a sliding window of 512 on five
  // layers of six).
  std::string architecture = "llama";
  // SmolLM2-135M's shape.
  int32_t n_vocab = 49152;
  int32_t n_embd = 576;
  int32_t n_layers = 30;
  int32_t n_heads = 9;
  int32_t n_kv_heads = 3;
  int32_t n_ff = 1536;
  int64_t context_length = 8192;
  // Every matrix, the embedding table included; a matrix whose rows are not
  // whole blocks of it (a K-quant's 256 elements in rows of 576) takes
  // llama-quantize's fallback (duet::type_for_rows), else f16.
  DType matrix_type = DType::kQ4_1;
  uint64_t seed = 1;
  // Weights are uniform in ±scale / 2. Large Q and K make attention peaked
  // (so positions and RoPE matter); V, output and FFN set how much each
  // layer adds to the hidden state.
  float qk_scale = 0.3f;
  float vo_scale = 0.03f;
  float ffn_scale = 0.05f;
};

// The shapes duet_make_random_model --shape names, or nullopt:
//   smollm2-135m  the defaults above (~110 MB in q4_1);
//   llama-1b      Llama-3.2-1B's body — 2048 wide, 16 layers, 32 query and 8
//                 KV heads of 64, ffn 8192 — on SmolLM2's 49,152-token
//                 vocabulary: 1.07 G weights, 0.67 GB in q4_1, 2.15 GB in
//                 f16. Its weight scales are SmolLM2's times sqrt(576 / 2048),
//                 so that each product adds about what a SmolLM2-shaped one
//                 does to its 2048-wide input.
// architecture, matrix_type and seed keep their defaults.
std::optional<RandomLlama> random_llama_shape(std::string_view name);

// The token the LM head favours after `token` when the layers are quiet:
// a permutation of [3, n_vocab); control tokens 0..2 map into it too.
int32_t random_llama_next(int32_t token, int32_t n_vocab);

// Whether `name` is an architecture write_random_llama() can write.
bool random_llama_architecture(std::string_view name);

// Writes the model to `path` (about 110 MB for the default shape in q4_1).
// Uses every hardware thread to draw and quantize the weights.
void write_random_llama(const std::filesystem::path& path, const RandomLlama& shape = {});

}  // namespace duet::testing
