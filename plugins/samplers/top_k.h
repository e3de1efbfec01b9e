// top_k.h — keeps the k best candidates.
#pragma once

#include <cstdint>

#include "duet/options.h"
#include "duet/sampler.h"

namespace duet::samplers {

// YAML: `- top_k: 40` or `- top_k: {k: 40}`.
//
// Option `k` (shorthand `value`, required): an integer >= 0.
//   k == 0 (sentinel): off, the list is left unchanged.
//   k >= the number of candidates: the list is left unchanged.
//   otherwise: keeps the k highest logits, ties going to the lower id so the
//   result does not depend on the list's order; the kept candidates are left
//   best first.
class TopK final : public Sampler {
 public:
  explicit TopK(const Options& options);
  std::string name() const override { return "top_k"; }
  void apply(Candidates& c, const SamplingContext& ctx) override;

 private:
  int64_t k_ = 0;
};

}  // namespace duet::samplers
