// duet/app/tensor_names.h — the GGUF names of a decoder model's tensors, by
// role: the one spelling shared by core's models, the test-model writer and
// duet_make_random_model.
//
// The names are llama.cpp's (gguf-py's MODEL_TENSOR names), which every GGUF
// converter writes whatever the architecture: "token_embd.weight",
// "blk.3.attn_q.weight", ...
#pragma once

#include <cstdint>
#include <string>

#include "duet/export.h"

namespace duet {

enum class TensorRole {
  // Whole-model tensors.
  kTokenEmbd,   // [n_vocab, n_embd] embedding table (also the LM head when tied)
  kOutputNorm,  // [n_embd] final RMS norm
  kOutput,      // [n_vocab, n_embd] LM head; absent when tied to kTokenEmbd
  kRopeFreqs,   // [head_dim / 2] RoPE frequency factors (Llama 3.1+), optional
  // Per-layer tensors.
  kAttnNorm,      // [n_embd]
  kAttnQ,         // [n_heads * head_dim, n_embd]
  kAttnK,         // [n_kv_heads * head_dim, n_embd]
  kAttnV,         // [n_kv_heads * head_dim, n_embd]
  kAttnQBias,     // [n_heads * head_dim] (Qwen2)
  kAttnKBias,     // [n_kv_heads * head_dim]
  kAttnVBias,     // [n_kv_heads * head_dim]
  kAttnQNorm,     // [head_dim] RMS norm of each query head (Qwen3, Gemma 3)
  kAttnKNorm,     // [head_dim] RMS norm of each key head
  kAttnOutput,    // [n_embd, n_heads * head_dim]
  kAttnPostNorm,  // [n_embd] RMS norm of the attention's output (Gemma 3)
  kFfnNorm,       // [n_embd]
  kFfnGate,       // [n_ff, n_embd]
  kFfnUp,         // [n_ff, n_embd]
  kFfnDown,       // [n_embd, n_ff]
  kFfnPostNorm,   // [n_embd] RMS norm of the FFN's output (Gemma 3)
};

// Whether `role` is one tensor per layer (named "blk.<layer>.…").
DUET_API bool is_layer_role(TensorRole role);

// The tensor's name: "output_norm.weight" for a whole-model role (layer
// ignored), "blk.<layer>.attn_q.weight" for a per-layer one,
// "blk.<layer>.attn_q.bias" for a bias.
DUET_API std::string tensor_name(TensorRole role, int32_t layer = 0);

}  // namespace duet
