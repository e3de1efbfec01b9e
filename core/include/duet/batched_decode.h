// duet/batched_decode.h — a decode-loop stage as the batching scheduler
// steps it, one sequence among many (ABI 1.3).
//
// Under `duet run` a stage owns the whole loop of its one sequence
// (Stage::run). The batching scheduler (`duet serve`, `run --prompts-file`,
// `bench --batch`) instead runs one forward pass over rows of many
// sequences at each step and keeps, for all of them, the sampling, the
// stop strings, the length limits and the KV-cache rollback. A stage that
// can decode there says so by returning a BatchedDecode from
// Stage::batched(): its limits, which are every request's defaults, and,
// per sequence, a SequenceDrafter that proposes tokens to verify.
//
// At each step a decoding sequence feeds its newest token plus the draft
// its drafter proposed; row j of the pass is sampled exactly as the plain
// decode loop would sample it (same history, same random-number counter),
// draft token j is kept iff it equals that draw, the first draw that
// differs (or the one after the whole draft) is kept too, and the cache
// positions of the rejected draft tokens are rolled back. So any drafter
// gives the plain decode loop's tokens; a good one gives several per pass.
//
// The same drafter serves the stage's Stage::run: run_drafted_decode()
// below is that loop for one Session, so a drafting stage is a drafter,
// its options, and two one-line overrides (examples/stage-plugin).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "duet/export.h"

namespace duet {

class Session;

// What a decode stage's options say every request gets unless it sets its own.
struct DUET_API DecodeLimits {
  int32_t max_new_tokens = 256;   // 1..16777216
  std::vector<std::string> stop;  // stop strings; end-of-generation tokens always stop
};

// One sequence's draft policy, made when the sequence starts decoding and
// dropped when it ends. Called on the scheduler's thread only.
class DUET_API SequenceDrafter {
 public:
  virtual ~SequenceDrafter() = default;
  // Fills `draft` (which arrives empty) with at most `max_tokens` (>= 1)
  // tokens to verify after tokens.back(); leaving it empty runs the one
  // token alone. `tokens` is the sequence so far: prompt, then generated
  // (the last one sampled and not yet run).
  virtual void propose(std::span<const int32_t> tokens, int32_t max_tokens,
                       std::vector<int32_t>& draft) = 0;
  // After the pass that verified the last proposal: `drafted` tokens were
  // proposed (0 when it proposed none or the scheduler had no room for
  // them) and the first `kept` of them were accepted.
  virtual void observe(int32_t drafted, int32_t kept) = 0;
};

class DUET_API BatchedDecode {
 public:
  virtual ~BatchedDecode() = default;
  virtual DecodeLimits limits() const = 0;
  // A fresh drafter for a sequence that starts decoding, or nullptr for
  // one token per pass (the plain decode loop).
  virtual std::unique_ptr<SequenceDrafter> start_sequence() const = 0;
};

// The decode loop of one session with drafts from `drafter`, verified as
// the batching scheduler verifies them: samples a token from the session's
// last logits, then at each pass runs the newest token and the draft
// (Session::forward(n, true)), keeps draft token j iff Session::sample(j)
// draws it, truncates the rest, and tells the drafter. Stops at an
// end-of-generation token, a stop string of `limits`, max_new_tokens or a
// full cache, streaming text through a Generation. The tokens are the
// plain decode stage's under any sampler chain and seed. REQUIRES: a
// forward pass (prefill) has produced logits.
DUET_API void run_drafted_decode(Session& session, const DecodeLimits& limits,
                                 SequenceDrafter& drafter);

}  // namespace duet
