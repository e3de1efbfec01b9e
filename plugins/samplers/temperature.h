// temperature.h — rescales logits: below 1 sharpens the distribution, above
// 1 flattens it.
#pragma once

#include "duet/options.h"
#include "duet/sampler.h"

namespace duet::samplers {

// YAML: `- temperature: 0.7` or `- temperature: {t: 0.7}`.
//
// Option `t` (shorthand `value`, required): 0, or a finite number >= 0.001
// (smaller ones would overflow the logits; 0 says greedy exactly).
//   t > 0: every logit becomes logit / t; the list is otherwise unchanged.
//   t == 0 (sentinel): greedy — selects the highest logit (ties to the lowest
//          id) and leaves it as the only candidate, as `greedy` does.
// Where it goes in the chain matters: llama.cpp applies temperature after
// the filters, vLLM before them; top_p and min_p see the rescaled logits.
class Temperature final : public Sampler {
 public:
  explicit Temperature(const Options& options);
  std::string name() const override { return "temperature"; }
  void apply(Candidates& c, const SamplingContext& ctx) override;

 private:
  double t_ = 1.0;
};

}  // namespace duet::samplers
