// dist.h — draws the token at random from the candidates' distribution.
#pragma once

#include "duet/options.h"
#include "duet/sampler.h"

namespace duet::samplers {

// YAML: `- dist`. Takes no options.
//
// Draws one candidate from softmax(logits) (in double, maximum subtracted)
// by inversion with u = ctx.uniform(0): walking the candidates in increasing
// id order, it selects the first whose cumulative probability exceeds u.
// The result therefore depends only on the set of (id, logit) pairs and on
// (seed, sequence, step), never on the list's order. Candidates with
// probability 0 are never drawn. Leaves the drawn candidate as the only one
// and selects it. Core also draws when no link selects (see
// duet/sampler.h); this link makes that draw explicit in the chain.
class Dist final : public Sampler {
 public:
  explicit Dist(const Options& options);
  std::string name() const override { return "dist"; }
  void apply(Candidates& c, const SamplingContext& ctx) override;
};

}  // namespace duet::samplers
