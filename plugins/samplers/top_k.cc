#include "top_k.h"

#include <limits>

#include "candidate_list.h"
#include "link_options.h"

namespace duet::samplers {

TopK::TopK(const Options& options) {
  std::optional<int64_t> k =
      primary_int(options, "k", {0, std::numeric_limits<int64_t>::max(), "0 = off"});
  options.finish();
  require_primary(k.has_value(), options, "top_k", "k", "40");
  k_ = *k;
}

void TopK::apply(Candidates& c, const SamplingContext&) {
  if (k_ == 0 || static_cast<uint64_t>(k_) >= c.ids.size()) return;
  keep_only(c, best_indices(c, static_cast<size_t>(k_)));
}

}  // namespace duet::samplers
