#include "sampling/sampler_chain.h"

#include <algorithm>
#include <cmath>

#include "duet/error.h"
#include "plugins/named_call.h"

namespace duet {

SamplerChain::SamplerChain(uint64_t seed, std::vector<std::shared_ptr<Sampler>> links,
                           std::vector<std::string> labels)
    : seed_(seed), links_(std::move(links)), labels_(std::move(labels)) {
  for (size_t i = labels_.size(); i < links_.size(); ++i)
    labels_.push_back("sampler '" + links_[i]->name() + "'");
}

int32_t SamplerChain::sample(std::span<const float> logits, std::span<const int32_t> history,
                             uint32_t sequence, uint64_t step) {
  Candidates& c = scratch_;
  c.ids.resize(logits.size());
  c.logits.assign(logits.begin(), logits.end());
  for (size_t i = 0; i < c.ids.size(); ++i) c.ids[i] = static_cast<int32_t>(i);
  c.selected = -1;

  SamplingContext ctx{seed_, sequence, step, history};
  for (size_t i = 0; i < links_.size(); ++i) {
    Sampler& link = *links_[i];
    const std::string& label = labels_[i];
    call_named(label, [&] { link.apply(c, ctx); });
    if (c.ids.empty() || c.ids.size() != c.logits.size()) {
      throw Error(ErrorKind::kPlugin, label + " left " + std::to_string(c.ids.size()) +
                                          " ids and " + std::to_string(c.logits.size()) +
                                          " logits; a link must keep at least one candidate");
    }
    if (c.selected >= 0) {
      // Ids are unique: one at its own index (the vocabulary in order, as
      // greedy first sees it) is there; only otherwise is the list searched.
      const auto at = static_cast<size_t>(c.selected);
      const bool in_place = at < c.ids.size() && c.ids[at] == c.selected;
      if (c.selected >= static_cast<int32_t>(logits.size()) ||
          (!in_place && std::find(c.ids.begin(), c.ids.end(), c.selected) == c.ids.end())) {
        throw Error(ErrorKind::kPlugin, label + " selected token " + std::to_string(c.selected) +
                                            ", which is not a candidate");
      }
      return c.selected;
    }
  }

  const int32_t drawn = draw_from_softmax(c, ctx.uniform(0));
  if (drawn < 0) throw Error(ErrorKind::kPlugin, "the sampler chain left only NaN logits");
  if (drawn >= static_cast<int32_t>(logits.size())) {
    throw Error(ErrorKind::kPlugin, "the sampler chain produced token " + std::to_string(drawn) +
                                        ", outside the vocabulary of " +
                                        std::to_string(logits.size()));
  }
  return drawn;
}

int32_t draw_from_softmax(const Candidates& c, double u) {
  std::vector<size_t> order(c.ids.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  if (!std::is_sorted(c.ids.begin(), c.ids.end())) {
    std::sort(order.begin(), order.end(), [&c](size_t a, size_t b) { return c.ids[a] < c.ids[b]; });
  }
  if (c.logits.empty()) return -1;
  const float max_logit = *std::max_element(
      c.logits.begin(), c.logits.end(), [](float a, float b) { return std::isnan(a) || a < b; });
  const auto weight = [max_logit](float l) {
    if (std::isnan(l)) return 0.0;
    if (std::isinf(max_logit)) return l == max_logit ? 1.0 : 0.0;
    return std::exp(double{l} - double{max_logit});
  };
  double total = 0.0;
  for (float l : c.logits) total += weight(l);
  if (!(total > 0.0)) return -1;
  const double target = u * total;
  double cumulative = 0.0;
  int32_t drawn = -1;
  for (size_t i : order) {
    const double w = weight(c.logits[i]);
    if (w == 0.0) continue;
    drawn = c.ids[i];
    cumulative += w;
    if (cumulative > target) break;
  }
  return drawn;
}

}  // namespace duet
