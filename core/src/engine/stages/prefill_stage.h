// prefill_stage.h — runs the whole prompt through the model at once (or in
// chunks of chunk_tokens, with identical results), filling every layer's KV
// cache; the last position's logits give the first generated token.
#pragma once

#include "duet/stage.h"
#include "engine/stage_options.h"

namespace duet {

class PrefillStage final : public Stage {
 public:
  explicit PrefillStage(const PrefillOptions& options) : options_(options) {}
  std::string name() const override { return "prefill"; }
  // Throws duet::Error(kInputRejected) when there is no prompt left to
  // process or the prompt does not fit in the cache.
  void run(Session& session) override;

 private:
  PrefillOptions options_;
};

}  // namespace duet
