#include "lookup_decode_stage.h"

#include <algorithm>

#include "duet/error.h"
#include "duet/generation.h"
#include "duet/session.h"

namespace duet::speculative {

LookupDecodeOptions LookupDecodeOptions::parse(const Options& options) {
  LookupDecodeOptions o;
  o.limits.max_new_tokens =
      static_cast<int32_t>(options.get_int("max_new_tokens", 256, 1, 1 << 24));
  if (options.has("stop")) o.limits.stop = {options.get_string("stop", "")};
  check_stop_strings(o.limits.stop, options.path() + ".stop");
  DrafterOptions& d = o.drafter;
  d.draft_tokens = static_cast<int32_t>(options.get_int("draft_tokens", 8, 1, 64));
  d.ngram.ngram_max = static_cast<int32_t>(options.get_int("ngram_max", 32, 1, 256));
  d.ngram.ngram_min = static_cast<int32_t>(options.get_int("ngram_min", 3, 1, d.ngram.ngram_max));
  d.backoff_max = static_cast<int32_t>(options.get_int("backoff_max", 16, 0, 1024));
  options.finish();
  return o;
}

void LookupDecodeStage::run(Session& session) {
  const DecodeLimits& limits = options_.limits;
  Generation out(session, limits.stop);
  NgramDrafter drafter(options_.drafter);
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
    if (std::min(useful, fits) > 0)
      drafter.propose(session.tokens(), std::min(useful, fits), draft);
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

}  // namespace duet::speculative
