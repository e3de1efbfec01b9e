#include "dist.h"

#include <algorithm>
#include <numeric>

#include "candidate_list.h"
#include "softmax.h"

namespace duet::samplers {

Dist::Dist(const Options& options) { options.finish(); }

void Dist::apply(Candidates& c, const SamplingContext& ctx) {
  const std::vector<double> prob = softmax(c.logits);
  std::vector<size_t> by_id(c.ids.size());
  std::iota(by_id.begin(), by_id.end(), size_t{0});
  std::sort(by_id.begin(), by_id.end(), [&](size_t a, size_t b) { return c.ids[a] < c.ids[b]; });

  const double u = ctx.uniform(0);
  double cumulative = 0.0;
  size_t chosen = by_id.front();
  for (size_t i : by_id) {
    if (prob[i] == 0.0) continue;
    chosen = i;
    cumulative += prob[i];
    // The probabilities may sum to slightly under 1; a u above the sum then
    // falls through to the last candidate with non-zero probability.
    if (u < cumulative) break;
  }
  select_only(c, chosen);
}

}  // namespace duet::samplers
