// model.h — what core runs forward passes through: one architecture's
// layers with their weights bound on a backend (internal to core).
//
// Sessions and the batching scheduler name only this interface; each
// architecture is one implementation under core/src/models/ (llama.h), and
// make_model() picks it from the file's general.architecture.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "duet/attention.h"
#include "duet/backend.h"
#include "duet/gguf.h"
#include "duet/kv_cache.h"
#include "duet/model_hparams.h"
#include "duet/step_batch.h"

namespace duet {

// Thread-safety: none; one thread runs forward passes at a time.
class Model {
 public:
  virtual ~Model() = default;

  virtual const ModelHParams& hparams() const = 0;
  // Bytes of weights the backend's device holds (0 when they stay mapped).
  virtual uint64_t device_weight_bytes() const = 0;

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

// The model of `file`'s architecture with its weights bound on `backend`.
// Throws duet::Error(kModelFile) as the architecture's constructor does.
std::unique_ptr<Model> make_model(std::shared_ptr<const GgufFile> file, const ModelHParams& hparams,
                                  Backend& backend);

}  // namespace duet
