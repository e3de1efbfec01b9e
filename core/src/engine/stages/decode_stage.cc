#include "engine/stages/decode_stage.h"

#include "duet/generation.h"
#include "duet/session.h"

namespace duet {

void DecodeStage::run(Session& session) {
  Generation out(session, limits_.stop);
  for (int32_t i = 0; i < limits_.max_new_tokens && session.finish_reason() == FinishReason::kNone;
       ++i) {
    if (!out.add(session.sample())) break;
    if (i + 1 == limits_.max_new_tokens || session.room() < 1) {
      session.finish(FinishReason::kLength);
      break;
    }
    // Normally the one token just sampled; more if an earlier stage left
    // tokens uncached, so the next logits always follow the whole sequence.
    session.forward(static_cast<int32_t>(session.tokens().size()) - session.cached(), false);
    ++session.stats().decode_passes;
  }
  out.finish();
}

}  // namespace duet
