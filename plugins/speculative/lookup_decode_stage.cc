#include "lookup_decode_stage.h"

#include <algorithm>

#include "duet/error.h"
#include "duet/generation.h"
#include "duet/session.h"

namespace duet::speculative {

LookupDecodeOptions LookupDecodeOptions::parse(const Options& options) {
  LookupDecodeOptions o;
  o.max_new_tokens = static_cast<int32_t>(options.get_int("max_new_tokens", 256, 1, 1 << 24));
  if (options.has("stop")) o.stop = {options.get_string("stop", "")};
  check_stop_strings(o.stop, options.path() + ".stop");
  o.draft_tokens = static_cast<int32_t>(options.get_int("draft_tokens", 8, 1, 64));
  o.ngram.ngram_max = static_cast<int32_t>(options.get_int("ngram_max", 32, 1, 256));
  o.ngram.ngram_min = static_cast<int32_t>(options.get_int("ngram_min", 3, 1, o.ngram.ngram_max));
  o.backoff_max = static_cast<int32_t>(options.get_int("backoff_max", 16, 0, 1024));
  options.finish();
  return o;
}

void LookupDecodeStage::run(Session& session) {
  Generation out(session, options_.stop);
  const auto size = [&session] { return static_cast<int32_t>(session.tokens().size()); };
  const auto length_reached = [&] {
    return session.stats().generated_tokens >= options_.max_new_tokens || session.room() < 1;
  };
  int32_t pause = 0;    // tokens still to generate without a draft
  int32_t backoff = 0;  // the pause after the next failed draft (0: 1)
  // The longest next draft: one more than the last draft kept, doubled
  // after a draft kept whole. Each draft row costs a share of a pass
  // (~0.35 of a one-token pass on onednn), so drafts are kept about as
  // long as they are being accepted.
  int32_t cap = options_.draft_tokens;

  bool running = session.finish_reason() == FinishReason::kNone && out.add(session.sample());
  while (running) {
    if (length_reached()) {
      session.finish(FinishReason::kLength);
      break;
    }
    // The last token is generated but not cached; a draft follows it.
    const int32_t last = size() - 1;
    const int32_t useful = options_.max_new_tokens - session.stats().generated_tokens - 1;
    const int32_t fits = static_cast<int32_t>(std::min<int64_t>(session.room() - 1, 1 << 24));
    std::vector<int32_t> draft;
    if (pause > 0) {
      --pause;
    } else {
      draft = ngram_draft(session.tokens(), options_.ngram, std::min({cap, useful, fits}));
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
    if (!draft.empty() && kept == 0 && options_.backoff_max > 0) {
      pause = std::max(1, backoff);
      backoff = std::min(options_.backoff_max, pause * 2);
    } else if (kept > 0) {
      backoff = 0;
    }
    if (!draft.empty()) {
      const bool whole = kept == static_cast<int32_t>(draft.size());
      cap = std::min(options_.draft_tokens, whole ? 2 * cap : kept + 1);
    }
  }
  out.finish();
}

}  // namespace duet::speculative
