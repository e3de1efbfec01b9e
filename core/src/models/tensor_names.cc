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
    case TensorRole::kAttnNorm:
      return "attn_norm";
    case TensorRole::kAttnQ:
      return "attn_q";
    case TensorRole::kAttnK:
      return "attn_k";
    case TensorRole::kAttnV:
      return "attn_v";
    case TensorRole::kAttnQNorm:
      return "attn_q_norm";
    case TensorRole::kAttnKNorm:
      return "attn_k_norm";
    case TensorRole::kAttnOutput:
      return "attn_output";
    case TensorRole::kFfnNorm:
      return "ffn_norm";
    case TensorRole::kFfnGate:
      return "ffn_gate";
    case TensorRole::kFfnUp:
      return "ffn_up";
    case TensorRole::kFfnDown:
      return "ffn_down";
  }
  return "unknown";
}

}  // namespace

bool is_layer_role(TensorRole role) {
  return role != TensorRole::kTokenEmbd && role != TensorRole::kOutputNorm &&
         role != TensorRole::kOutput;
}

std::string tensor_name(TensorRole role, int32_t layer) {
  std::string name = stem(role);
  name += ".weight";
  if (is_layer_role(role)) name = "blk." + std::to_string(layer) + "." + name;
  return name;
}

}  // namespace duet
