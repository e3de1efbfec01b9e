// decode_stage.h — the decode loop: sample a token from the last logits,
// stream its text, and run it through the model, one token at a time, until
// an end-of-generation token, a stop string, max_new_tokens or a full cache.
// Under the batching scheduler it is the same loop with no drafts.
#pragma once

#include <memory>
#include <string>

#include "duet/batched_decode.h"
#include "duet/stage.h"
#include "engine/stage_options.h"

namespace duet {

class DecodeStage final : public Stage, public BatchedDecode {
 public:
  explicit DecodeStage(const DecodeLimits& limits) : limits_(limits) {}
  std::string name() const override { return "decode"; }
  // REQUIRES: a forward pass (prefill) has produced logits.
  void run(Session& session) override;
  const BatchedDecode* batched() const override { return this; }
  DecodeLimits limits() const override { return limits_; }
  std::unique_ptr<SequenceDrafter> start_sequence() const override { return nullptr; }

 private:
  DecodeLimits limits_;
};

}  // namespace duet
