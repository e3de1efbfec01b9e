#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "duet/batched_decode.h"
#include "duet/error.h"
#include "duet/generation.h"
#include "duet/session.h"

namespace duet {

void run_drafted_decode(Session& session, const DecodeLimits& limits, SequenceDrafter& drafter) {
  Generation out(session, limits.stop);
  const auto size = [&session] { return static_cast<int32_t>(session.tokens().size()); };
  const auto length_reached = [&] {
    return session.stats().generated_tokens >= limits.max_new_tokens || session.room() < 1;
  };
  std::vector<int32_t> draft;
  bool running = session.finish_reason() == FinishReason::kNone && out.add(session.sample());
  while (running) {
    if (length_reached()) {
      session.finish(FinishReason::kLength);
      break;
    }
    // The last token is generated but not cached; a draft follows it.
    const int32_t last = size() - 1;
    const int32_t useful = limits.max_new_tokens - session.stats().generated_tokens - 1;
    const int32_t fits = static_cast<int32_t>(std::min<int64_t>(session.room() - 1, 1 << 24));
    draft.clear();
    const int32_t most = std::min(useful, fits);
    if (most > 0) drafter.propose(session.tokens(), most, draft);
    if (static_cast<int64_t>(draft.size()) > std::max(most, 0)) {
      throw Error(ErrorKind::kPlugin, "the stage's drafter proposed " +
                                          std::to_string(draft.size()) +
                                          " draft tokens where at most " +
                                          std::to_string(std::max(most, 0)) + " were asked for");
    }
    for (int32_t t : draft) session.append(t);
    const int32_t first = session.cached();
    session.forward(size() - first, !draft.empty());
    ++session.stats().decode_passes;

    // Row of position p: p - first (every row kept), or 0 (only the last).
    int32_t kept = 0;
    for (;; ++kept) {
      const int32_t position = last + kept;  // the token whose row is drawn from
      const int32_t token = session.sample(draft.empty() ? 0 : position - first);
      if (kept < static_cast<int32_t>(draft.size()) && token == draft[static_cast<size_t>(kept)]) {
        if (!out.confirm(position + 1)) {
          session.truncate(position + 2);
          running = false;
          break;
        }
        continue;
      }
      session.truncate(position + 1);
      running = out.add(token);
      break;
    }
    drafter.observe(static_cast<int32_t>(draft.size()), kept);
  }
  out.finish();
}

}  // namespace duet
