#include "duet/app/model_hparams.h"

#include <algorithm>
#include <array>

#include "duet/app/gguf.h"
#include "duet/app/suggest.h"
#include "duet/error.h"

namespace duet {
namespace {

const std::vector<std::string>& supported_architectures() {
  static const std::vector<std::string> kArchitectures = {"llama"};
  return kArchitectures;
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

bool is_supported_architecture(const std::string& architecture) {
  const auto& all = supported_architectures();
  return std::find(all.begin(), all.end(), architecture) != all.end();
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
  if (h.n_embd % h.n_heads != 0 || h.n_heads % h.n_kv_heads != 0) {
    throw Error(
        ErrorKind::kModelFile,
        file + ": inconsistent heads: embedding_length " + std::to_string(h.n_embd) +
            ", head_count " + std::to_string(h.n_heads) + ", head_count_kv " +
            std::to_string(h.n_kv_heads) +
            "; head_count must divide embedding_length and head_count_kv must divide head_count");
  }
  h.head_dim = h.n_embd / h.n_heads;
  if (h.head_dim % 2 != 0) {
    throw Error(ErrorKind::kModelFile, file + ": head dimension " + std::to_string(h.head_dim) +
                                           " is odd; rotary embeddings need an even one");
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
  return h;
}

}  // namespace duet
