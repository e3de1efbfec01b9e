#include "frequency_penalty.h"

#include "link_options.h"
#include "penalty_window.h"

namespace duet::samplers {

FrequencyPenalty::FrequencyPenalty(const Options& options) {
  std::optional<double> penalty =
      primary_real(options, "penalty", {-2.0, 2.0, false, false, "0 = off"});
  last_n_ = read_last_n(options);
  options.finish();
  require_primary(penalty.has_value(), options, "frequency_penalty", "penalty", "0.5");
  penalty_ = *penalty;
}

void FrequencyPenalty::apply(Candidates& c, const SamplingContext& ctx) {
  if (penalty_ == 0.0 || last_n_ == 0) return;
  const auto counts = count_window(ctx.history, last_n_);
  for (size_t i = 0; i < c.ids.size(); ++i) {
    auto it = counts.find(c.ids[i]);
    if (it != counts.end()) c.logits[i] = static_cast<float>(c.logits[i] - penalty_ * it->second);
  }
}

}  // namespace duet::samplers
