// duet/app/model_hparams.h — the hyperparameters of a decoder model, read from
// GGUF metadata and checked for consistency.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "duet/export.h"

namespace duet {

class GgufFile;

struct DUET_API ModelHParams {
  std::string architecture;    // general.architecture, e.g. "llama"
  std::string name;            // general.name, "" when absent
  int64_t context_length = 0;  // positions the model was trained for
  int32_t n_embd = 0;          // hidden size
  int32_t n_layers = 0;
  int32_t n_ff = 0;        // feed-forward hidden size
  int32_t n_heads = 0;     // query heads
  int32_t n_kv_heads = 0;  // key/value heads (grouped-query attention)
  int32_t head_dim = 0;    // attention.key_length, else n_embd / n_heads
  int32_t n_vocab = 0;     // tokens in the vocabulary
  float rope_freq_base = 10000.0f;
  float rms_eps = 1e-5f;
  float attention_scale = 0.0f;  // applied to q·k: 1/sqrt(head_dim)
  // Positions a sliding-window layer attends to (Gemma 3's local layers);
  // 0 when the architecture has none.
  int32_t sliding_window = 0;
  // Each layer's attention window (AttentionSpec::window): sliding_window
  // for a sliding-window layer, 0 for a layer that attends to every earlier
  // position. n_layers entries.
  std::vector<int32_t> layer_windows;
};

// Architectures Duet has a model definition for (general.architecture
// values), and whether `architecture` is one of them.
DUET_API std::vector<std::string> supported_architectures();
DUET_API bool is_supported_architecture(const std::string& architecture);

// Reads `<arch>.*` keys. Throws duet::Error(kModelFile) naming the file and
// key when the architecture is unsupported; when the file has an `<arch>.*`
// key Duet does not implement (RoPE scaling, sliding windows, experts, ...),
// rather than run the model wrong; when a key is missing or out of its sane
// range (so that nothing later sizes an allocation from an absurd value);
// or when heads do not divide the hidden size or the query heads.
DUET_API ModelHParams read_hparams(const GgufFile& file);

}  // namespace duet
