#include "dist.h"

#include <algorithm>

#include "candidate_list.h"
#include "duet/error.h"

namespace duet::samplers {

Dist::Dist(const Options& options) { options.finish(); }

void Dist::apply(Candidates& c, const SamplingContext& ctx) {
  const int32_t drawn = draw_from_softmax(c, ctx.uniform(0));
  if (drawn < 0) throw Error(ErrorKind::kPlugin, "dist: every candidate's logit is NaN");
  const auto at = static_cast<size_t>(std::find(c.ids.begin(), c.ids.end(), drawn) - c.ids.begin());
  select_only(c, at);
}

}  // namespace duet::samplers
