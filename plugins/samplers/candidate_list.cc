#include "candidate_list.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <numeric>

namespace duet::samplers {
namespace {

float rank_key(float logit) {
  return std::isnan(logit) ? -std::numeric_limits<float>::infinity() : logit;
}

}  // namespace

bool ranks_before(float la, int32_t ia, float lb, int32_t ib) {
  const float ka = rank_key(la);
  const float kb = rank_key(lb);
  if (ka != kb) return ka > kb;
  return ia < ib;
}

size_t best_index(const Candidates& c) {
  assert(!c.ids.empty());
  // A greedy step scans the whole vocabulary while the backend's threads
  // wait, so the scan reads an id only where the key reaches the best so
  // far (rarely, after the first few hundred), not at every candidate as a
  // loop over ranks_before would.
  const float* logits = c.logits.data();
  size_t best = 0;
  float key = rank_key(logits[0]);
  for (size_t i = 1; i < c.ids.size(); ++i) {
    const float k = rank_key(logits[i]);
    if (k >= key && (k > key || c.ids[i] < c.ids[best])) {
      key = k;
      best = i;
    }
  }
  return best;
}

std::vector<size_t> best_indices(const Candidates& c, size_t count) {
  assert(count <= c.ids.size());
  std::vector<size_t> order(c.ids.size());
  std::iota(order.begin(), order.end(), size_t{0});
  // Only the first `count` need ordering: O(n log count) for top_k over a
  // whole vocabulary.
  const auto mid = order.begin() + static_cast<std::ptrdiff_t>(count);
  std::partial_sort(order.begin(), mid, order.end(), [&](size_t a, size_t b) {
    return ranks_before(c.logits[a], c.ids[a], c.logits[b], c.ids[b]);
  });
  order.erase(mid, order.end());
  return order;
}

void keep_only(Candidates& c, const std::vector<size_t>& indices) {
  assert(!indices.empty());
  std::vector<int32_t> ids;
  std::vector<float> logits;
  ids.reserve(indices.size());
  logits.reserve(indices.size());
  for (size_t i : indices) {
    ids.push_back(c.ids[i]);
    logits.push_back(c.logits[i]);
  }
  c.ids = std::move(ids);
  c.logits = std::move(logits);
}

void select_only(Candidates& c, size_t index) {
  keep_only(c, {index});
  c.selected = c.ids.front();
}

}  // namespace duet::samplers
