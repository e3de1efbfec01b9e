#include "ngram_drafter.h"

#include <algorithm>

namespace duet::speculative {

void NgramDrafter::propose(std::span<const int32_t> tokens, int32_t max_tokens,
                           std::vector<int32_t>& draft) {
  if (pause_ > 0) {
    --pause_;
    return;
  }
  draft = ngram_draft(tokens, options_.ngram, std::min(cap_, max_tokens));
}

void NgramDrafter::observe(int32_t drafted, int32_t kept) {
  if (drafted == 0) return;
  if (kept == 0 && options_.backoff_max > 0) {
    pause_ = std::max(1, backoff_);
    backoff_ = std::min(options_.backoff_max, pause_ * 2);
  } else if (kept > 0) {
    backoff_ = 0;
  }
  cap_ = std::min(options_.draft_tokens, kept == drafted ? 2 * cap_ : kept + 1);
}

}  // namespace duet::speculative
