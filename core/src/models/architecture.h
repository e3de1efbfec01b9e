// architecture.h — the registry from a file's general.architecture to how
// core runs it (internal to core).
//
// Every architecture here is the pre-norm decoder of decoder_model.h; a row
// says what its layers add to that block. read_hparams() reads the metadata
// keys they share and refuses any other `<arch>.*` key, and DecoderModel
// refuses any tensor its layout does not bind, so a feature Duet does not
// implement is named, never ignored. Adding an architecture of this block
// is one row (docs/architecture.md, "Adding an architecture").
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "duet/ops.h"

namespace duet {

// What one architecture's decoder layers hold beyond Llama's.
struct DecoderLayout {
  enum class Ffn { kSwiGLU, kGeGLU };

  // How RoPE pairs a head's elements: GGUF llama files store Q and K rows
  // permuted for adjacent pairs; converters write other architectures in
  // the Hugging Face order, which rotates halves (NeoX).
  RopeParams::Pairs rope_pairs = RopeParams::Pairs::kAdjacent;
  // rope_freqs.weight, when the file has it: per-pair frequency factors
  // that divide every layer's RoPE angles (Llama 3.1+'s "llama3" scaling).
  bool rope_freqs = false;
  // attn_q_norm / attn_k_norm: each head of q and k RMS-normalized (with the
  // layer's eps) before RoPE.
  bool qk_norm = false;
  // attn_q.bias, attn_k.bias, attn_v.bias added to the projections.
  bool qkv_bias = false;
  // The embedding rows times sqrt(n_embd) (in f32) before the first layer.
  bool embed_scale = false;
  // silu(gate) * up, or gelu(gate) * up with GELU's tanh form.
  Ffn ffn = Ffn::kSwiGLU;
  // post_attention_norm / post_ffw_norm: the attention's and the FFN's
  // outputs RMS-normalized before they join the residual stream.
  bool post_norms = false;
  // Sliding-window layers: with a pattern p > 0, layer l is local when
  // l % p < p - 1 — it attends to the last `attention.sliding_window`
  // positions (a hyperparameter the architecture then requires) and rotates
  // with RoPE base local_rope_base — and global otherwise.
  int32_t window_pattern = 0;
  float local_rope_base = 0.0f;
};

struct Architecture {
  std::string_view name;  // general.architecture
  DecoderLayout layout;
};

// The row for `name`, or nullptr when core has no model for it.
const Architecture* find_architecture(std::string_view name);

// Whether layer `l` of `layout` is a sliding-window (local) layer.
inline bool is_local_layer(const DecoderLayout& layout, int32_t l) {
  return layout.window_pattern > 0 && l % layout.window_pattern < layout.window_pattern - 1;
}

// Every registered general.architecture, in the registry's order.
std::vector<std::string> architecture_names();

}  // namespace duet
