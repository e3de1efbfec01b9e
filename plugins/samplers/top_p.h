// top_p.h — nucleus filtering: keeps the most likely candidates that
// together hold probability p.
#pragma once

#include "duet/options.h"
#include "duet/sampler.h"

namespace duet::samplers {

// YAML: `- top_p: 0.95` or `- top_p: {p: 0.95}`.
//
// Option `p` (shorthand `value`, required): a number in (0, 1].
//   p == 1 (sentinel): off, the list is left unchanged.
//   otherwise: takes softmax over the current candidates (in double, maximum
//   subtracted), ranks them by logit (ties to the lower id) and keeps the
//   shortest best-first prefix whose cumulative probability is >= p — always
//   at least one candidate. The kept candidates are left best first.
class TopP final : public Sampler {
 public:
  explicit TopP(const Options& options);
  std::string name() const override { return "top_p"; }
  void apply(Candidates& c, const SamplingContext& ctx) override;

 private:
  double p_ = 1.0;
};

}  // namespace duet::samplers
