#include "duet/app/token_logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace duet {

TokenLogprobs token_logprobs(std::span<const float> logits, int32_t chosen, int32_t top) {
  float max = -std::numeric_limits<float>::infinity();
  for (float x : logits) max = std::max(max, x);
  double sum = 0.0;
  // Each term is at most 1: f32 exp (vectorisable) is exact enough; the
  // sum of up to ~10^5 of them is kept in double.
  for (float x : logits) sum += std::exp(x - max);
  const double log_norm = static_cast<double>(max) + std::log(sum);
  const auto logprob = [&](int32_t id) {
    return static_cast<float>(static_cast<double>(logits[static_cast<size_t>(id)]) - log_norm);
  };

  TokenLogprobs out;
  out.chosen = {chosen, logprob(chosen)};
  const auto k = std::min<size_t>(static_cast<size_t>(top), logits.size());
  // The k best ids, kept sorted: one pass, k <= 20 compares per logit at worst.
  std::vector<int32_t> best;
  best.reserve(k + 1);
  const auto better = [&](int32_t a, int32_t b) {
    const float la = logits[static_cast<size_t>(a)];
    const float lb = logits[static_cast<size_t>(b)];
    return la > lb || (la == lb && a < b);
  };
  for (size_t i = 0; i < logits.size() && k > 0; ++i) {
    const auto id = static_cast<int32_t>(i);
    if (best.size() == k && !better(id, best.back())) continue;
    best.insert(std::upper_bound(best.begin(), best.end(), id, better), id);
    if (best.size() > k) best.pop_back();
  }
  out.top.reserve(best.size());
  for (int32_t id : best) out.top.push_back({id, logprob(id)});
  return out;
}

}  // namespace duet
