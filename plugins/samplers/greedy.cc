#include "greedy.h"

namespace duet::samplers {

Greedy::Greedy(const Options& options) { options.finish(); }

void Greedy::apply(Candidates& c, const SamplingContext&) {
  size_t best = 0;
  for (size_t i = 1; i < c.ids.size(); ++i) {
    if (c.logits[i] > c.logits[best] || (c.logits[i] == c.logits[best] && c.ids[i] < c.ids[best])) {
      best = i;
    }
  }
  c.selected = c.ids[best];
}

}  // namespace duet::samplers
