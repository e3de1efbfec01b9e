#include "duet/app/tensor_names.h"

namespace duet {
namespace {

const char* stem(TensorRole role) {
  switch (role) {
    case TensorRole::kTokenEmbd:
      return "token_embd";
    case TensorRole::kOutputNorm:
      return "output_norm";
    case TensorRole::kOutput:
      return "output";
    case TensorRole::kRopeFreqs:
      return "rope_freqs";
    case TensorRole::kAttnNorm:
      return "attn_norm";
    case TensorRole::kAttnQ:
      return "attn_q";
    case TensorRole::kAttnK:
      return "attn_k";
    case TensorRole::kAttnV:
      return "attn_v";
    case TensorRole::kAttnQBias:
      return "attn_q";
    case TensorRole::kAttnKBias:
      return "attn_k";
    case TensorRole::kAttnVBias:
      return "attn_v";
    case TensorRole::kAttnQNorm:
      return "attn_q_norm";
    case TensorRole::kAttnKNorm:
      return "attn_k_norm";
    case TensorRole::kAttnOutput:
      return "attn_output";
    case TensorRole::kAttnPostNorm:
      return "post_attention_norm";
    case TensorRole::kFfnNorm:
      return "ffn_norm";
    case TensorRole::kFfnGate:
      return "ffn_gate";
    case TensorRole::kFfnUp:
      return "ffn_up";
    case TensorRole::kFfnDown:
      return "ffn_down";
    case TensorRole::kFfnPostNorm:
      return "post_ffw_norm";
  }
  return "unknown";
}

}  // namespace

bool is_layer_role(TensorRole role) {
  return role != TensorRole::kTokenEmbd && role != TensorRole::kOutputNorm &&
         role != TensorRole::kOutput && role != TensorRole::kRopeFreqs;
}

std::string tensor_name(TensorRole role, int32_t layer) {
  const bool bias = role == TensorRole::kAttnQBias || role == TensorRole::kAttnKBias ||
                    role == TensorRole::kAttnVBias;
  std::string name = stem(role);
  name += bias ? ".bias" : ".weight";
  if (is_layer_role(role)) name = "blk." + std::to_string(layer) + "." + name;
  return name;
}

}  // namespace duet
