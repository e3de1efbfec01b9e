#include "duet/perplexity.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace duet {

double perplexity(std::span<const float> logits, std::span<const int32_t> ids, int32_t n_vocab) {
  assert(ids.size() >= 2 && logits.size() == ids.size() * static_cast<size_t>(n_vocab));
  const auto vocab = static_cast<size_t>(n_vocab);
  double nll = 0.0;
  for (size_t i = 0; i + 1 < ids.size(); ++i) {
    std::span<const float> row = logits.subspan(i * vocab, vocab);
    const double max_logit = *std::max_element(row.begin(), row.end());
    double total = 0.0;
    for (float l : row) total += std::exp(double{l} - max_logit);
    nll -= double{row[static_cast<size_t>(ids[i + 1])]} - max_logit - std::log(total);
  }
  return std::exp(nll / static_cast<double>(ids.size() - 1));
}

}  // namespace duet
