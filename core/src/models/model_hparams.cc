#include "duet/app/model_hparams.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <string_view>

#include "duet/app/gguf.h"
#include "duet/app/suggest.h"
#include "duet/error.h"
#include "models/architecture.h"

namespace duet {
namespace {

// The `<arch>.*` keys read_hparams() understands, without the prefix. Any
// other key under the prefix names something the model would do that Duet
// does not (rope.scaling.factor, attention.sliding_window, expert_count,
// ...), so the file is refused with that key.
constexpr std::array<std::string_view, 13> kKnownKeys = {
    "context_length",       "embedding_length",       "block_count",
    "feed_forward_length",  "attention.head_count",   "attention.head_count_kv",
    "attention.key_length", "attention.value_length", "attention.layer_norm_rms_epsilon",
    "rope.freq_base",
    "rope.dimension_count",  // must equal head_dim: all of a head rotates
    "rope.scaling.type",     // must be "none"
    "vocab_size",            // informative; tokenizer.ggml.tokens decides
};

// `windowed`: the architecture has sliding-window layers, whose window it
// reads from attention.sliding_window.
void refuse_unknown_keys(const GgufFile& f, const std::string& arch, bool windowed) {
  const std::string prefix = arch + ".";
  for (const GgufMetadataEntry& e : f.metadata()) {
    if (e.key.substr(0, prefix.size()) != prefix) continue;
    const std::string_view rest = e.key.substr(prefix.size());
    if (std::find(kKnownKeys.begin(), kKnownKeys.end(), rest) != kKnownKeys.end()) continue;
    if (windowed && rest == "attention.sliding_window") continue;
    throw Error(ErrorKind::kModelFile,
                f.path().string() + ": " + std::string(e.key) + " is a hyperparameter Duet's " +
                    arch +
                    " model does not implement; it would run the model wrong, so the file is "
                    "refused (docs/architecture.md lists what each architecture supports)");
  }
}

// Reads an integer key and checks it against [min, max]: every size later
// allocated from a hyperparameter is bounded here.
int64_t read_bounded(const GgufFile& f, const std::string& key, int64_t min, int64_t max) {
  int64_t v = f.get_int(key);
  if (v < min || v > max) {
    throw Error(ErrorKind::kModelFile, f.path().string() + ": " + key + " is " + std::to_string(v) +
                                           "; expected " + std::to_string(min) + ".." +
                                           std::to_string(max));
  }
  return v;
}

}  // namespace

std::vector<std::string> supported_architectures() { return architecture_names(); }

bool is_supported_architecture(const std::string& architecture) {
  return find_architecture(architecture) != nullptr;
}

ModelHParams read_hparams(const GgufFile& f) {
  ModelHParams h;
  const std::string file = f.path().string();
  h.architecture = std::string(f.get_string("general.architecture"));
  if (!is_supported_architecture(h.architecture)) {
    throw Error(ErrorKind::kModelFile,
                file + ": general.architecture '" + h.architecture +
                    "' is not supported; supported: " + quoted_list(supported_architectures()));
  }
  const DecoderLayout& layout = find_architecture(h.architecture)->layout;
  refuse_unknown_keys(f, h.architecture, layout.window_pattern > 0);
  h.name = std::string(f.find_string("general.name").value_or(""));
  const std::string a = h.architecture + ".";
  h.context_length = read_bounded(f, a + "context_length", 1, int64_t{1} << 24);
  h.n_embd = static_cast<int32_t>(read_bounded(f, a + "embedding_length", 1, 1 << 16));
  h.n_layers = static_cast<int32_t>(read_bounded(f, a + "block_count", 1, 1024));
  h.n_ff = static_cast<int32_t>(read_bounded(f, a + "feed_forward_length", 1, 1 << 20));
  h.n_heads = static_cast<int32_t>(read_bounded(f, a + "attention.head_count", 1, 1024));
  h.n_kv_heads = h.n_heads;
  if (f.find(a + "attention.head_count_kv")) {
    h.n_kv_heads =
        static_cast<int32_t>(read_bounded(f, a + "attention.head_count_kv", 1, h.n_heads));
  }
  if (h.n_heads % h.n_kv_heads != 0) {
    throw Error(ErrorKind::kModelFile, file + ": inconsistent heads: head_count " +
                                           std::to_string(h.n_heads) + ", head_count_kv " +
                                           std::to_string(h.n_kv_heads) +
                                           "; head_count_kv must divide head_count");
  }
  if (f.find(a + "attention.key_length")) {
    h.head_dim = static_cast<int32_t>(read_bounded(f, a + "attention.key_length", 1, 1 << 12));
  } else if (h.n_embd % h.n_heads == 0) {
    h.head_dim = h.n_embd / h.n_heads;
  } else {
    throw Error(ErrorKind::kModelFile, file + ": embedding_length " + std::to_string(h.n_embd) +
                                           " is not a multiple of head_count " +
                                           std::to_string(h.n_heads) + " and " + a +
                                           "attention.key_length is absent, so the head "
                                           "dimension is unknown");
  }
  if (h.head_dim % 2 != 0) {
    throw Error(ErrorKind::kModelFile, file + ": head dimension " + std::to_string(h.head_dim) +
                                           " is odd; rotary embeddings need an even one");
  }
  // Keys that may only restate what Duet does.
  const auto require_head_dim = [&](const std::string& key) {
    if (!f.find(key)) return;
    const int64_t v = f.get_int(key);
    if (v != h.head_dim) {
      throw Error(ErrorKind::kModelFile,
                  file + ": " + key + " is " + std::to_string(v) + " but the head dimension is " +
                      std::to_string(h.head_dim) + "; Duet implements only " + key + " = " +
                      std::to_string(h.head_dim));
    }
  };
  require_head_dim(a + "attention.value_length");
  require_head_dim(a + "rope.dimension_count");
  if (auto scaling = f.find_string(a + "rope.scaling.type"); scaling && *scaling != "none") {
    throw Error(ErrorKind::kModelFile, file + ": " + a + "rope.scaling.type is '" +
                                           std::string(*scaling) +
                                           "'; Duet implements only unscaled RoPE ('none')");
  }
  const GgufValue* tokens = f.find("tokenizer.ggml.tokens");
  if (tokens == nullptr || tokens->as_array() == nullptr) {
    throw Error(ErrorKind::kModelFile, file + ": tokenizer.ggml.tokens is missing or not an array");
  }
  const uint64_t n_vocab = tokens->as_array()->size();
  if (n_vocab < 1 || n_vocab > (1u << 24)) {
    throw Error(ErrorKind::kModelFile, file + ": tokenizer.ggml.tokens has " +
                                           std::to_string(n_vocab) +
                                           " entries; expected 1..16777216");
  }
  h.n_vocab = static_cast<int32_t>(n_vocab);
  h.rope_freq_base = static_cast<float>(f.find_float(a + "rope.freq_base").value_or(10000.0));
  h.rms_eps = static_cast<float>(f.get_float(a + "attention.layer_norm_rms_epsilon"));
  if (!(h.rope_freq_base > 0.0f) || !(h.rms_eps > 0.0f) || h.rms_eps > 1.0f) {
    throw Error(ErrorKind::kModelFile,
                file + ": rope.freq_base " + std::to_string(h.rope_freq_base) +
                    " and layer_norm_rms_epsilon " + std::to_string(h.rms_eps) +
                    " must be positive (epsilon at most 1)");
  }
  h.attention_scale = 1.0f / std::sqrt(static_cast<float>(h.head_dim));
  if (layout.window_pattern > 0) {
    h.sliding_window =
        static_cast<int32_t>(read_bounded(f, a + "attention.sliding_window", 1, h.context_length));
  }
  for (int32_t l = 0; l < h.n_layers; ++l)
    h.layer_windows.push_back(is_local_layer(layout, l) ? h.sliding_window : 0);
  return h;
}

}  // namespace duet
