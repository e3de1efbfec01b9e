#include "greedy.h"

#include "candidate_list.h"

namespace duet::samplers {

Greedy::Greedy(const Options& options) { options.finish(); }

void Greedy::apply(Candidates& c, const SamplingContext&) { select_only(c, best_index(c)); }

}  // namespace duet::samplers
