#include "models/architecture.h"

#include <array>

namespace duet {
namespace {

using Pairs = RopeParams::Pairs;

// llama: Llama 1/2/3.0, Mistral 7B v0.1, SmolLM/SmolLM2, TinyLlama — every
//        file whose metadata and tensors are the plain Llama block (a Llama
//        3.1+ file carries rope_freqs.weight, which DecoderModel refuses).
// qwen3: Qwen3 dense models: per-head RMS norms on q and k, head_dim from
//        attention.key_length, NeoX RoPE.
constexpr std::array kArchitectures = {
    Architecture{"llama", DecoderLayout{Pairs::kAdjacent, false}},
    Architecture{"qwen3", DecoderLayout{Pairs::kHalves, true}},
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
