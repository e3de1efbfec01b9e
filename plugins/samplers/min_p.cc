#include "min_p.h"

#include <algorithm>

#include "candidate_list.h"
#include "link_options.h"
#include "softmax.h"

namespace duet::samplers {

MinP::MinP(const Options& options) {
  std::optional<double> p = primary_real(options, "p", {0.0, 1.0, false, false, "0 = off"});
  options.finish();
  require_primary(p.has_value(), options, "min_p", "p", "0.05");
  p_ = *p;
}

void MinP::apply(Candidates& c, const SamplingContext&) {
  if (p_ == 0.0) return;
  const std::vector<double> prob = softmax(c.logits);
  const double threshold = p_ * *std::max_element(prob.begin(), prob.end());
  std::vector<size_t> kept;
  for (size_t i = 0; i < prob.size(); ++i)
    if (prob[i] >= threshold) kept.push_back(i);
  keep_only(c, kept);
}

}  // namespace duet::samplers
