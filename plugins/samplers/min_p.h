// min_p.h — drops candidates far less likely than the most likely one.
#pragma once

#include "duet/options.h"
#include "duet/sampler.h"

namespace duet::samplers {

// YAML: `- min_p: 0.05` or `- min_p: {p: 0.05}`.
//
// Option `p` (shorthand `value`, required): a number in [0, 1].
//   p == 0 (sentinel): off, the list is left unchanged.
//   otherwise: keeps the candidates whose probability (softmax over the
//   current candidates, in double) is >= p times the highest probability.
//   The most likely candidates always stay; p == 1 keeps only them (all of
//   them on a tie). The kept candidates stay in the order they arrived.
class MinP final : public Sampler {
 public:
  explicit MinP(const Options& options);
  std::string name() const override { return "min_p"; }
  void apply(Candidates& c, const SamplingContext& ctx) override;

 private:
  double p_ = 0.0;
};

}  // namespace duet::samplers
