// lookup_decode_stage.h — the decode loop with prompt-lookup speculative
// decoding: each forward pass runs the last generated token and up to
// draft_tokens draft tokens (ngram_draft.h), and keeps every draft token the
// sampler chain would have drawn itself.
//
// Verification is the scheduler's (duet/stage.h): row j of the pass's
// logits is sampled exactly as the plain decode loop would sample at that
// point (same history, same RNG counter). Draft token j is kept iff it
// equals that draw; at the first mismatch the drawn token is kept instead,
// the rest are dropped (the cache rolls back with them), and when all are
// kept the last row's draw is a bonus token. So the output is the plain
// decode loop's, token for token, under any sampler chain and seed, as
// long as a row of a several-token pass has the logits a one-token pass
// would have (exactly so on the reference backend; on others up to
// rounding, see docs/performance.md).
//
// This is speculative sampling with a one-hot draft distribution q:
// accepting draft x with probability min(1, p(x)/q(x)) = p(x) and else
// drawing from the residual (p - q)+ normalised — p without x — is the
// same as drawing y ~ p and keeping x iff y = x, so every token is
// distributed as the target model's p.
//
// Draft lengths and pauses: ngram_drafter.h.
//
// Options (validated once, at creation):
//   max_new_tokens  1..16777216, default 256
//   stop            a stop string (one); end-of-generation tokens always stop
//   draft_tokens    1..64, default 8: the most draft tokens one pass verifies
//   ngram_min       1..ngram_max, default 3: the shortest suffix of the
//                   sequence that, found earlier, yields a draft
//   ngram_max       1..256, default 32: suffixes are matched up to this
//                   length; a draft is at most as long as its match
//   backoff_max     0..1024, default 16: after a pass whose first draft token
//                   fails, draft nothing for 1, then 2, 4, ... up to this many
//                   tokens (reset by a kept draft token); 0 = never back off
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "duet/options.h"
#include "duet/stage.h"
#include "ngram_drafter.h"

namespace duet::speculative {

struct LookupDecodeOptions {
  DecodeLimits limits;  // max_new_tokens, stop
  DrafterOptions drafter;

  // Throws duet::Error(kConfig) naming the key, the value and the accepted
  // range for a bad or unknown option.
  static LookupDecodeOptions parse(const Options& options);
};

// One NgramDrafter per sequence, whose drafts the scheduler verifies as
// described above.
class LookupDecodeStage final : public Stage {
 public:
  explicit LookupDecodeStage(const LookupDecodeOptions& options) : options_(options) {}
  std::string name() const override { return "lookup_decode"; }
  DecodeLimits limits() const override { return options_.limits; }
  std::unique_ptr<SequenceDrafter> start_sequence() const override {
    return std::make_unique<NgramDrafter>(options_.drafter);
  }

 private:
  LookupDecodeOptions options_;
};

}  // namespace duet::speculative
