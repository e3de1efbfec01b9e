// dist.h — draws the token at random from the candidates' distribution.
#pragma once

#include "duet/options.h"
#include "duet/sampler.h"

namespace duet::samplers {

// YAML: `- dist`. Takes no options.
//
// Draws one candidate with duet::draw_from_softmax (duet/sampler.h) and
// u = ctx.uniform(0): the very rule core's final draw uses when no link
// selects, so a chain ending in `dist` draws what the same chain without it
// draws. The result depends only on the set of (id, logit) pairs and on
// (seed, sequence, step), never on the list's order; candidates of weight 0
// are never drawn. Leaves the drawn candidate as the only one and selects
// it. Throws duet::Error(kPlugin) when every logit is NaN.
class Dist final : public Sampler {
 public:
  explicit Dist(const Options& options);
  std::string name() const override { return "dist"; }
  void apply(Candidates& c, const SamplingContext& ctx) override;
};

}  // namespace duet::samplers
