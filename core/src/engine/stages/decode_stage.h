// decode_stage.h — core's decode loop: one token per forward pass (no
// drafts), until an end-of-generation token, a stop string,
// max_new_tokens or a full cache. The scheduler does the sampling and the
// stopping; the stage gives every request's defaults.
#pragma once

#include <memory>
#include <string>

#include "duet/stage.h"

namespace duet {

class DecodeStage final : public Stage {
 public:
  explicit DecodeStage(const DecodeLimits& limits) : limits_(limits) {}
  std::string name() const override { return "decode"; }
  DecodeLimits limits() const override { return limits_; }
  std::unique_ptr<SequenceDrafter> start_sequence() const override { return nullptr; }

 private:
  DecodeLimits limits_;
};

}  // namespace duet
