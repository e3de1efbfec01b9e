// decoder_model.h — the pre-norm decoder every registered architecture is:
// which ops run in which order, on any backend (internal to core).
//
// Per layer, for the rows of one step:
//   h  = rmsnorm(x, attn_norm)
//   q, k, v = h·Wqᵀ, h·Wkᵀ, h·Wvᵀ
//   q, k = rmsnorm of each head (attn_q_norm, attn_k_norm)   [layout.qk_norm]
//   rope(q), rope(k) at each row's position, pairs as layout.rope_pairs
//   x += attention(q, k, v over the cache)·Woᵀ
//   h  = rmsnorm(x, ffn_norm)
//   x += (silu(h·Wgateᵀ) * h·Wupᵀ)·Wdownᵀ
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
  DecoderModel(std::shared_ptr<const GgufFile> file, const ModelHParams& hparams,
               const DecoderLayout& layout, Backend& backend);
  ~DecoderModel() override;

  const ModelHParams& hparams() const override { return hparams_; }

  void forward(std::span<const int32_t> tokens, const StepBatch& step, KVCache& kv,
               Attention& attention, std::span<const int32_t> logit_rows,
               std::vector<float>& logits) override;

 private:
  struct Layer {
    TensorView attn_norm, wq, wk, wv, q_norm, k_norm, wo, ffn_norm, w_gate, w_up, w_down;
  };
  struct Scratch;

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
  std::vector<Layer> layers_;
  std::unique_ptr<Scratch> scratch_;
};

}  // namespace duet
