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
  // How RoPE pairs a head's elements: GGUF llama files store Q and K rows
  // permuted for adjacent pairs; converters write other architectures in
  // the Hugging Face order, which rotates halves (NeoX).
  RopeParams::Pairs rope_pairs = RopeParams::Pairs::kAdjacent;
  // attn_q_norm / attn_k_norm: each head of q and k RMS-normalized (with the
  // layer's eps) before RoPE.
  bool qk_norm = false;
};

struct Architecture {
  std::string_view name;  // general.architecture
  DecoderLayout layout;
};

// The row for `name`, or nullptr when core has no model for it.
const Architecture* find_architecture(std::string_view name);

// Every registered general.architecture, in the registry's order.
std::vector<std::string> architecture_names();

}  // namespace duet
