// greedy.h — selects the candidate with the highest logit.
#pragma once

#include "duet/options.h"
#include "duet/sampler.h"

namespace duet::samplers {

// Ties go to the lowest token id, so the choice never depends on the order
// of the candidate list. Takes no options.
class Greedy final : public Sampler {
 public:
  explicit Greedy(const Options& options);
  std::string name() const override { return "greedy"; }
  void apply(Candidates& c, const SamplingContext& ctx) override;
};

}  // namespace duet::samplers
