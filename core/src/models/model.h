// model.h — what core runs forward passes through: one architecture's
// layers with their weights bound on a backend (internal to core).
//
// Sessions and the batching scheduler name only this interface. Every
// architecture core accepts (models/architecture.h) is a row of the
// registry that make_model() reads; today all of them build DecoderModel
// (decoder_model.h) with their own layout.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "duet/app/gguf.h"
#include "duet/app/model_hparams.h"
#include "duet/attention.h"
#include "duet/backend.h"
#include "duet/kv_cache.h"
#include "duet/plugin.h"
#include "duet/step_batch.h"

namespace duet {

// Thread-safety: none; one thread runs forward passes at a time.
class Model {
 public:
  virtual ~Model() = default;

  virtual const ModelHParams& hparams() const = 0;

  // Runs `tokens` (row i of `step` is tokens[i], rows of several sequences
  // as `step` lays them out) through every layer, storing each row's K and
  // V in `kv`, and writes the logits of the rows in `logit_rows` to
  // `logits` ([logit_rows.size(), n_vocab], host memory). A row's result
  // depends on its own sequence only (its tokens and cached positions),
  // to the backend's float rounding. REQUIRES: every token id in
  // [0, n_vocab) and `step` built by core.
  virtual void forward(std::span<const int32_t> tokens, const StepBatch& step, KVCache& kv,
                       Attention& attention, std::span<const int32_t> logit_rows,
                       std::vector<float>& logits) = 0;
};

// The model of `hparams.architecture` (read from `file` by read_hparams(),
// which refuses architectures and keys core cannot run) with `file`'s
// weights bound on `backend`, whose plugin was built against ABI 1.
// `backend_abi_minor` (PluginHost::backend_abi_minor). Throws
// duet::Error(kModelFile) for an unregistered architecture and as
// DecoderModel's constructor does.
std::unique_ptr<Model> make_model(std::shared_ptr<const GgufFile> file, const ModelHParams& hparams,
                                  Backend& backend, uint32_t backend_abi_minor = DUET_ABI_MINOR);

}  // namespace duet
