// llama.h — the Llama architecture: which ops run in which order, on any
// backend (internal to core).
//
// Per layer, for the rows of one step:
//   h  = rmsnorm(x, attn_norm)
//   q, k, v = h·Wqᵀ, h·Wkᵀ, h·Wvᵀ;  rope(q), rope(k) at each row's position
//   x += attention(q, k, v over the cache)·Woᵀ
//   h  = rmsnorm(x, ffn_norm)
//   x += (silu(h·Wgateᵀ) * h·Wupᵀ)·Wdownᵀ
// then logits = rmsnorm(x, output_norm)·Woutᵀ for the rows asked for, where
// Wout is output.weight or, for tied embeddings, token_embd.weight. K and V
// are projections of each layer's own input, as the model was trained.
// GGUF Llama files store Q and K rows permuted for adjacent-pair RoPE.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "duet/app/gguf.h"
#include "duet/app/model_hparams.h"
#include "duet/attention.h"
#include "duet/backend.h"
#include "models/checked_ops.h"
#include "models/model.h"

namespace duet {

class LlamaModel final : public Model {
 public:
  // Binds every weight of `file` on `backend`: in place when the device can
  // read host memory (the file stays mapped), else copied to the device.
  // Throws duet::Error(kModelFile) naming a missing tensor, a wrong shape or
  // a type the backend cannot compute with, and kOutOfMemory from the device.
  LlamaModel(std::shared_ptr<const GgufFile> file, const ModelHParams& hparams, Backend& backend);
  ~LlamaModel() override;

  const ModelHParams& hparams() const override { return hparams_; }

  void forward(std::span<const int32_t> tokens, const StepBatch& step, KVCache& kv,
               Attention& attention, std::span<const int32_t> logit_rows,
               std::vector<float>& logits) override;

 private:
  struct Layer {
    TensorView attn_norm, wq, wk, wv, wo, ffn_norm, w_gate, w_up, w_down;
  };
  struct Scratch;

  TensorView bind(const std::string& name, Shape expected);
  void ensure_scratch(int32_t n_rows, int32_t n_logit_rows);

  std::shared_ptr<const GgufFile> file_;
  ModelHParams hparams_;
  Backend& backend_;
  CheckedOps ops_;
  std::vector<std::unique_ptr<Buffer>> weight_buffers_;  // when copied to the device
  TensorView token_embd_, output_norm_, output_;
  std::vector<Layer> layers_;
  std::unique_ptr<Scratch> scratch_;
};

}  // namespace duet
