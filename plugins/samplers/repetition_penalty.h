// repetition_penalty.h — makes recently seen tokens less likely, the
// multiplicative penalty of CTRL and llama.cpp.
#pragma once

#include <cstdint>

#include "duet/options.h"
#include "duet/sampler.h"

namespace duet::samplers {

// YAML: `- repetition_penalty: 1.1` or
//       `- repetition_penalty: {penalty: 1.1, last_n: 64}`.
//
// Option `penalty` (shorthand `value`, required): a finite number > 0;
//   1 (sentinel) is off. For each distinct token in the window — however
//   often it occurs — a candidate's logit becomes logit / penalty when it is
//   > 0 and logit * penalty otherwise, so penalty > 1 always lowers it.
// Option `last_n`: the window, see penalty_window.h (default 64, 0 = off,
//   -1 = whole history).
// Candidates not in the window, and the list itself, are left unchanged.
class RepetitionPenalty final : public Sampler {
 public:
  explicit RepetitionPenalty(const Options& options);
  std::string name() const override { return "repetition_penalty"; }
  void apply(Candidates& c, const SamplingContext& ctx) override;

 private:
  double penalty_ = 1.0;
  int64_t last_n_ = 0;
};

}  // namespace duet::samplers
