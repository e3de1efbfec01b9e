#include "temperature.h"

#include <limits>

#include "candidate_list.h"
#include "link_options.h"

namespace duet::samplers {

Temperature::Temperature(const Options& options) {
  std::optional<double> t = primary_real(
      options, "t", {0.0, std::numeric_limits<double>::infinity(), false, false, "0 = greedy"});
  options.finish();
  require_primary(t.has_value(), options, "temperature", "t", "0.7");
  t_ = *t;
}

void Temperature::apply(Candidates& c, const SamplingContext&) {
  if (t_ == 0.0) {
    select_only(c, best_index(c));
    return;
  }
  for (float& logit : c.logits) logit = static_cast<float>(logit / t_);
}

}  // namespace duet::samplers
