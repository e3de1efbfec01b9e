// greedy.h — selects the candidate with the highest logit.
#pragma once

#include "duet/options.h"
#include "duet/sampler.h"

namespace duet::samplers {

// YAML: `- greedy`. Takes no options.
//
// Selects the highest logit; ties go to the lowest token id, so the choice
// never depends on the order of the candidate list. Leaves the winner as the
// only candidate, so no later link can drop the selected id.
class Greedy final : public Sampler {
 public:
  explicit Greedy(const Options& options);
  std::string name() const override { return "greedy"; }
  void apply(Candidates& c, const SamplingContext& ctx) override;
};

}  // namespace duet::samplers
