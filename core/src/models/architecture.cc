#include "models/architecture.h"

#include <array>

namespace duet {
namespace {

using Pairs = RopeParams::Pairs;

// llama: Llama 1/2/3.x, Mistral 7B v0.1, SmolLM/SmolLM2, TinyLlama — the
//        plain Llama block, with Llama 3.1+'s RoPE frequency factors
//        (rope_freqs.weight) when the file has them.
// qwen2: Qwen2 and Qwen2.5 dense models: Q/K/V biases, NeoX RoPE.
// qwen3: Qwen3 dense models: per-head RMS norms on q and k, head_dim from
//        attention.key_length, NeoX RoPE.
// gemma3: Gemma 3 text models: embedding scaled by sqrt(n_embd), per-head
//        q/k norms, GELU-gated FFN, norms after attention and FFN, five
//        sliding-window layers (RoPE base 10k) to one global layer (the
//        file's base), as llama.cpp runs it.
DecoderLayout llama() {
  DecoderLayout d;
  d.rope_freqs = true;
  return d;
}

DecoderLayout qwen2() {
  DecoderLayout d;
  d.rope_pairs = Pairs::kHalves;
  d.qkv_bias = true;
  return d;
}

DecoderLayout qwen3() {
  DecoderLayout d;
  d.rope_pairs = Pairs::kHalves;
  d.qk_norm = true;
  return d;
}

DecoderLayout gemma3() {
  DecoderLayout d;
  d.rope_pairs = Pairs::kHalves;
  d.qk_norm = true;
  d.embed_scale = true;
  d.ffn = DecoderLayout::Ffn::kGeGLU;
  d.post_norms = true;
  d.window_pattern = 6;
  d.local_rope_base = 10000.0f;
  return d;
}

const std::array kArchitectures = {
    Architecture{"llama", llama()},
    Architecture{"qwen2", qwen2()},
    Architecture{"qwen3", qwen3()},
    Architecture{"gemma3", gemma3()},
};

}  // namespace

const Architecture* find_architecture(std::string_view name) {
  for (const Architecture& a : kArchitectures) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

std::vector<std::string> architecture_names() {
  std::vector<std::string> names;
  for (const Architecture& a : kArchitectures) names.emplace_back(a.name);
  return names;
}

}  // namespace duet
