// duet/sampler.h — one link of a sampling chain.
//
// A pipeline's sampler chain is an ordered list of Samplers, written in the
// YAML in the order they apply and recorded with every result. Each link
// edits the candidate list (rescales, filters, biases logits) or selects a
// token. If no link selects, core draws from the softmax of what remains,
// using the counter-based RNG in SamplingContext.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "duet/export.h"

namespace duet {

struct DUET_API Candidates {
  std::vector<int32_t> ids;   // token ids still eligible
  std::vector<float> logits;  // logits[i] belongs to ids[i]
  int32_t selected = -1;      // set by a selecting link; -1 = none yet
};

// Everything a link may read besides the candidates. `uniform(draw)` returns
// a number in [0, 1) that depends only on (seed, sequence, step, draw): the
// same request gives the same numbers whatever else is running.
struct DUET_API SamplingContext {
  uint64_t seed = 0;
  uint32_t sequence = 0;
  uint64_t step = 0;                 // index of the token being generated
  std::span<const int32_t> history;  // prompt and generated tokens so far

  double uniform(uint32_t draw) const;
};

// The one draw rule, used by core's final draw (when no link selects) and
// by the `dist` link: the candidates are walked in id order with weights
// exp(l - max) in double — when the largest logit is infinite, its tokens
// share all the weight; NaN logits get none — and the first whose running
// sum of weights exceeds u * total is drawn. So a token depends only on the
// (id, logit) pairs and u, not on the order of the list. Returns the drawn
// id, or -1 when no candidate has any weight (every logit NaN).
// REQUIRES: 0 <= u < 1, c.ids.size() == c.logits.size().
DUET_API int32_t draw_from_softmax(const Candidates& c, double u);

// Created per request (each session and each batched request has its own
// chain) by a factory that validated its options. Thread-safety: none;
// apply() may keep state across steps (e.g. a window of recent tokens).
class DUET_API Sampler {
 public:
  virtual ~Sampler() = default;

  // The chain entry's name as written in the YAML ("top_k").
  virtual std::string name() const = 0;

  // Edits `c` in place. Must leave at least one candidate, and if it sets
  // c.selected, to an id present in c.ids.
  virtual void apply(Candidates& c, const SamplingContext& ctx) = 0;
};

}  // namespace duet
