#include "repetition_penalty.h"

#include <limits>

#include "link_options.h"
#include "penalty_window.h"

namespace duet::samplers {

RepetitionPenalty::RepetitionPenalty(const Options& options) {
  std::optional<double> penalty = primary_real(
      options, "penalty", {0.0, std::numeric_limits<double>::infinity(), true, false, "1 = off"});
  last_n_ = read_last_n(options);
  options.finish();
  require_primary(penalty.has_value(), options, "repetition_penalty", "penalty", "1.1");
  penalty_ = *penalty;
}

void RepetitionPenalty::apply(Candidates& c, const SamplingContext& ctx) {
  if (penalty_ == 1.0 || last_n_ == 0) return;
  const auto counts = count_window(ctx.history, last_n_);
  for (size_t i = 0; i < c.ids.size(); ++i) {
    if (counts.count(c.ids[i]) == 0) continue;
    float& logit = c.logits[i];
    logit = static_cast<float>(logit > 0.0f ? logit / penalty_ : logit * penalty_);
  }
}

}  // namespace duet::samplers
