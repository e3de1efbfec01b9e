#include "sampler_chain.h"

#include <algorithm>
#include <cmath>

#include "duet/error.h"

namespace duet {

SamplerChain::SamplerChain(uint64_t seed, std::vector<std::shared_ptr<Sampler>> links)
    : seed_(seed), links_(std::move(links)) {}

int32_t SamplerChain::sample(std::span<const float> logits, std::span<const int32_t> history,
                             uint32_t sequence, uint64_t step) {
  Candidates& c = scratch_;
  c.ids.resize(logits.size());
  c.logits.assign(logits.begin(), logits.end());
  for (size_t i = 0; i < c.ids.size(); ++i) c.ids[i] = static_cast<int32_t>(i);
  c.selected = -1;

  SamplingContext ctx{seed_, sequence, step, history};
  for (const auto& link : links_) {
    link->apply(c, ctx);
    if (c.ids.empty() || c.ids.size() != c.logits.size()) {
      throw Error(ErrorKind::kPlugin, "sampler '" + link->name() + "' left " + std::to_string(c.ids.size()) +
                                          " ids and " + std::to_string(c.logits.size()) +
                                          " logits; a link must keep at least one candidate");
    }
    if (c.selected >= 0) {
      if (std::find(c.ids.begin(), c.ids.end(), c.selected) == c.ids.end()) {
        throw Error(ErrorKind::kPlugin, "sampler '" + link->name() + "' selected token " +
                                            std::to_string(c.selected) + ", which is not a candidate");
      }
      return c.selected;
    }
  }

  // The draw: inverse CDF of the softmax, in double, over candidates in id
  // order, so that the token depends only on the (id, logit) pairs and the
  // counter — the same rule as the `dist` link.
  std::vector<size_t> order(c.ids.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  if (!std::is_sorted(c.ids.begin(), c.ids.end())) {
    std::sort(order.begin(), order.end(), [&c](size_t a, size_t b) { return c.ids[a] < c.ids[b]; });
  }
  const float max_logit = *std::max_element(c.logits.begin(), c.logits.end());
  double total = 0.0;
  for (float l : c.logits) total += std::exp(double{l} - double{max_logit});
  const double target = ctx.uniform(0) * total;
  double cumulative = 0.0;
  for (size_t i : order) {
    cumulative += std::exp(double{c.logits[i]} - double{max_logit});
    if (cumulative > target) return c.ids[i];
  }
  return c.ids[order.back()];  // only reachable through rounding at the very top
}

std::string SamplerChain::describe() const {
  std::string out;
  for (const auto& link : links_) out += (out.empty() ? "" : " -> ") + link->name();
  return out.empty() ? "draw" : out;
}

}  // namespace duet
