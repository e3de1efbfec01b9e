// decoder_model.h — the pre-norm decoder every registered architecture is:
// which ops run in which order, on any backend (internal to core).
//
// x = embedding rows (times sqrt(n_embd) with layout.embed_scale); then per
// layer, for the rows of one step ([..]: where the layout says so):
//   h  = rmsnorm(x, attn_norm)
//   q, k, v = h·Wqᵀ, h·Wkᵀ, h·Wvᵀ  [+ attn_q/k/v.bias]
//   [q, k = rmsnorm of each head (attn_q_norm, attn_k_norm)]
//   rope(q), rope(k) at each row's position, pairs as layout.rope_pairs,
//     base layout.local_rope_base on a sliding-window layer, angles divided
//     by rope_freqs.weight's factors where the layout reads them
//   a  = attention(q, k, v over the cache)·Woᵀ  [then rmsnorm(a, post_attention_norm)]
//   x += a
//   h  = rmsnorm(x, ffn_norm)
//   f  = (act(h·Wgateᵀ) * h·Wupᵀ)·Wdownᵀ, act silu or gelu  [then rmsnorm(f, post_ffw_norm)]
//   x += f
// then logits = rmsnorm(x, output_norm)·Woutᵀ for the rows asked for, where
// Wout is output.weight or, for tied embeddings, token_embd.weight. K and V
// are projections of each layer's own input, as the model was trained.
// q and the attention output are n_heads * head_dim wide, which need not be
// n_embd (Qwen3).
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "duet/app/gguf.h"
#include "duet/app/model_hparams.h"
#include "duet/app/tensor_names.h"
#include "duet/attention.h"
#include "duet/backend.h"
#include "models/architecture.h"
#include "models/checked_ops.h"
#include "models/model.h"

namespace duet {

class DecoderModel final : public Model {
 public:
  // Binds every weight `layout` needs from `file` on `backend`: in place
  // when the device can read host memory (the file stays mapped), else
  // copied to the device. Throws duet::Error(kModelFile) naming a missing
  // tensor, a wrong shape, a type the backend cannot compute with, or a
  // tensor the layout does not use (rope_freqs.weight, a bias: something
  // the model does that this layout would skip), and kOutOfMemory from the
  // device.
  // `abi_minor`: the backend plugin's DUET_ABI_MINOR (CheckedOps); a
  // layout needing ops the backend lacks is refused with kPlugin, naming
  // the op.
  DecoderModel(std::shared_ptr<const GgufFile> file, const ModelHParams& hparams,
               const DecoderLayout& layout, Backend& backend, uint32_t abi_minor);
  ~DecoderModel() override;

  const ModelHParams& hparams() const override { return hparams_; }

  void forward(std::span<const int32_t> tokens, const StepBatch& step, KVCache& kv,
               Attention& attention, std::span<const int32_t> logit_rows,
               std::vector<float>& logits) override;

 private:
  struct Layer {
    TensorView attn_norm, wq, wk, wv, q_bias, k_bias, v_bias, q_norm, k_norm, wo, attn_post_norm;
    TensorView ffn_norm, w_gate, w_up, w_down, ffn_post_norm;
  };
  struct Scratch;

  void require_layout_ops() const;
  TensorView bind(TensorRole role, int32_t layer, Shape expected);
  void refuse_unbound_tensors() const;
  void ensure_scratch(int32_t n_rows, int32_t n_logit_rows);

  std::shared_ptr<const GgufFile> file_;
  ModelHParams hparams_;
  DecoderLayout layout_;
  Backend& backend_;
  CheckedOps ops_;
  std::vector<std::unique_ptr<Buffer>> weight_buffers_;  // when copied to the device
  std::set<std::string, std::less<>> bound_;             // names of the tensors bound
  TensorView token_embd_, output_norm_, output_;
  TensorView rope_freqs_;  // data null when the file has none
  std::vector<Layer> layers_;
  std::unique_ptr<Scratch> scratch_;
};

}  // namespace duet
