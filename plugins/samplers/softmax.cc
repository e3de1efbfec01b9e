#include "softmax.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>

namespace duet::samplers {

std::vector<double> softmax(const std::vector<float>& logits) {
  assert(!logits.empty());
  double max = -std::numeric_limits<double>::infinity();
  for (float l : logits)
    if (!std::isnan(l)) max = std::max(max, static_cast<double>(l));

  std::vector<double> p(logits.size());
  double sum = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) {
    const double l = logits[i];
    if (std::isnan(l))
      p[i] = 0.0;
    else if (std::isinf(max))  // l - max would be NaN for l == max
      p[i] = l == max ? 1.0 : 0.0;
    else
      p[i] = std::exp(l - max);
    sum += p[i];
  }
  if (sum == 0.0) {  // every logit is NaN
    std::fill(p.begin(), p.end(), 1.0 / static_cast<double>(p.size()));
    return p;
  }
  for (double& x : p) x /= sum;
  return p;
}

}  // namespace duet::samplers
