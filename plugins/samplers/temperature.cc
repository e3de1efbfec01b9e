#include "temperature.h"

#include <limits>

#include "candidate_list.h"
#include "duet/error.h"
#include "link_options.h"

namespace duet::samplers {

Temperature::Temperature(const Options& options) {
  std::optional<double> t = primary_real(
      options, "t", {0.0, std::numeric_limits<double>::infinity(), false, false, "0 = greedy"});
  options.finish();
  require_primary(t.has_value(), options, "temperature", "t", "0.7");
  // Below this, logit / t overflows float for ordinary logits; such a
  // temperature means greedy, which 0 says exactly.
  constexpr double kMinPositive = 1e-3;
  if (*t > 0.0 && *t < kMinPositive) {
    throw Error(ErrorKind::kConfig, key_path(options, "t") + ": " + std::to_string(*t) +
                                        " is too small; use 0 for greedy or at least 0.001");
  }
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
