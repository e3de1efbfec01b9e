#include "top_p.h"

#include "candidate_list.h"
#include "link_options.h"
#include "softmax.h"

namespace duet::samplers {

TopP::TopP(const Options& options) {
  std::optional<double> p = primary_real(options, "p", {0.0, 1.0, true, false, "1 = off"});
  options.finish();
  require_primary(p.has_value(), options, "top_p", "p", "0.95");
  p_ = *p;
}

void TopP::apply(Candidates& c, const SamplingContext&) {
  if (p_ == 1.0) return;
  const std::vector<double> prob = softmax(c.logits);
  std::vector<size_t> order = best_indices(c, c.ids.size());
  double cumulative = 0.0;
  size_t kept = 0;
  while (kept < order.size()) {
    cumulative += prob[order[kept]];
    ++kept;
    if (cumulative >= p_) break;
  }
  order.resize(kept);
  keep_only(c, order);
}

}  // namespace duet::samplers
