// duet/stage.h — the decode-loop stage of a pipeline, as the scheduler
// steps it (ABI 1.7).
//
// One engine runs every pipeline: the scheduler (duet/app/scheduler.h),
// which at each step runs one forward pass over rows of many sequences —
// `duet run` and `duet chat` are one request through it. Core's prefill
// stage feeds each sequence's prompt in chunks; the stage after it, the
// decode loop, says per sequence what to run after each sampled token:
// nothing (one token per pass, core's `decode`), or a draft to verify in
// the same pass (`lookup_decode`, examples/stage-plugin).
//
// Verification is core's, so any stage gives the plain decode loop's
// tokens: at each step a decoding sequence feeds its newest token plus the
// draft its drafter proposed; row j of the pass is sampled exactly as the
// plain loop would sample it (same history, same random-number counter),
// draft token j is kept iff it equals that draw, the first draw that
// differs (or the one after the whole draft) is kept too, and the cache
// positions of the rejected draft tokens are rolled back. A good drafter
// gives several tokens per pass.
//
// ABI 1.7 replaced the interface of 1.0–1.6 (Stage::run(Session&), which
// owned one sequence's whole loop, and Stage::batched()); the host refuses
// stages of plugins built before it, naming the version they need.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "duet/export.h"

namespace duet {

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

// Created per pipeline by a factory that validated the stage's YAML options.
// Its methods may be called from any one thread at a time.
class DUET_API Stage {
 public:
  virtual ~Stage() = default;
  // The name the YAML uses ("decode", "lookup_decode").
  virtual std::string name() const = 0;
  // Every request's defaults: max_new_tokens and stop strings.
  virtual DecodeLimits limits() const = 0;
  // A fresh drafter for a sequence that starts decoding, or nullptr for
  // one token per pass (the plain decode loop).
  virtual std::unique_ptr<SequenceDrafter> start_sequence() const = 0;
};

}  // namespace duet
