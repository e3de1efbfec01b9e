// ngram_drafter.h — how long a sequence's next n-gram draft may be, and
// when to stop drafting for a while: the policy lookup_decode follows under
// `duet run` and under the batching scheduler alike.
//
// The longest next draft is one more than the last draft kept, doubled
// after a draft kept whole, at most draft_tokens: each draft row costs a
// share of a pass (~0.35 of a one-token pass on onednn), so drafts are kept
// about as long as they are being accepted. After a pass whose first draft
// token failed, nothing is drafted for 1, then 2, 4, ... up to backoff_max
// tokens (reset by a kept draft token; backoff_max 0 never pauses).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "duet/stage.h"
#include "ngram_draft.h"

namespace duet::speculative {

struct DrafterOptions {
  int32_t draft_tokens = 8;  // >= 1
  NgramSpec ngram;
  int32_t backoff_max = 16;  // >= 0
};

class NgramDrafter final : public SequenceDrafter {
 public:
  explicit NgramDrafter(const DrafterOptions& options)
      : options_(options), cap_(options.draft_tokens) {}
  void propose(std::span<const int32_t> tokens, int32_t max_tokens,
               std::vector<int32_t>& draft) override;
  void observe(int32_t drafted, int32_t kept) override;

 private:
  DrafterOptions options_;
  int32_t cap_;          // the longest next draft
  int32_t pause_ = 0;    // tokens still to generate without a draft
  int32_t backoff_ = 0;  // the pause after the next failed draft (0: 1)
};

}  // namespace duet::speculative
