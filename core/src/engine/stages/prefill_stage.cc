#include "engine/stages/prefill_stage.h"

#include <algorithm>

#include "duet/error.h"
#include "duet/session.h"

namespace duet {

void PrefillStage::run(Session& session) {
  const auto total = static_cast<int32_t>(session.tokens().size());
  const int32_t pending = total - session.cached();
  if (pending <= 0) {
    throw Error(ErrorKind::kInputRejected,
                "prefill: the prompt is empty; give a prompt of at least one token");
  }
  if (pending > session.room()) {
    throw Error(ErrorKind::kInputRejected,
                "prompt has " + std::to_string(pending) + " tokens but the KV cache has room for " +
                    std::to_string(session.room()) +
                    "; raise components.kv_cache.capacity_tokens or shorten the prompt");
  }
  const double start = session.elapsed_seconds();
  const int32_t chunk = options_.chunk_tokens > 0 ? options_.chunk_tokens : pending;
  for (int32_t done = 0; done < pending;) {
    const int32_t n = std::min(chunk, pending - done);
    session.forward(n, options_.all_logits);
    if (options_.all_logits) {
      auto rows = session.logits();
      session.kept_logits().insert(session.kept_logits().end(), rows.begin(), rows.end());
    }
    done += n;
  }
  session.stats().prefill_seconds += session.elapsed_seconds() - start;
}

}  // namespace duet
