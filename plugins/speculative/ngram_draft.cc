#include "ngram_draft.h"

#include <algorithm>

namespace duet::speculative {

std::vector<int32_t> ngram_draft(std::span<const int32_t> tokens, const NgramSpec& spec,
                                 int32_t max_tokens) {
  const auto size = static_cast<int64_t>(tokens.size());
  if (max_tokens <= 0 || size < 2) return {};
  const int32_t last = tokens[static_cast<size_t>(size - 1)];
  int64_t best = 0, best_end = -1;  // shared suffix length; where the occurrence ends
  // Occurrence ending at `end` (< size - 1, so a token follows it), most
  // recent first; its suffix shared with the sequence's stays before the
  // sequence's own (end - m < size - 1 - m always holds).
  for (int64_t end = size - 2; end >= 0 && best < spec.ngram_max; --end) {
    if (tokens[static_cast<size_t>(end)] != last) continue;
    int64_t m = 1;
    while (m < spec.ngram_max && end - m >= 0 &&
           tokens[static_cast<size_t>(end - m)] == tokens[static_cast<size_t>(size - 1 - m)]) {
      ++m;
    }
    if (m > best) {
      best = m;
      best_end = end;
    }
  }
  if (best < spec.ngram_min) return {};
  const int64_t from = best_end + 1;
  const int64_t to = std::min({size, from + max_tokens, from + best});
  return {tokens.begin() + from, tokens.begin() + to};
}

}  // namespace duet::speculative
