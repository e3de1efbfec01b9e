// decode_stage.h — the decode loop: sample a token from the last logits,
// stream its text, and run it through the model, one token at a time, until
// an end-of-generation token, a stop string, max_new_tokens or a full cache.
#pragma once

#include <string>

#include "duet/stage.h"
#include "engine/stage_options.h"

namespace duet {

class DecodeStage final : public Stage {
 public:
  explicit DecodeStage(const DecodeOptions& options) : options_(options) {}
  std::string name() const override { return "decode"; }
  // REQUIRES: a forward pass (prefill) has produced logits.
  void run(Session& session) override;

 private:
  DecodeOptions options_;
};

}  // namespace duet
