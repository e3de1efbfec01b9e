#include "candidate_list.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
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
  // wait. So: the largest logit first, 16 candidates at a time in four
  // independent 4-lane maxima (one running maximum waits on its own
  // latency: 31 us for 49,152 logits against 8 us); NaN never compares
  // greater, so it is skipped without a test. Then the candidates that
  // reach it, 16 at a time too, the smallest id among them (almost always
  // one candidate). When no logit is above -inf, every candidate ranks
  // -inf or NaN, which rank alike: the smallest id of all of them.
  using V = float __attribute__((vector_size(16)));
  constexpr size_t kLanes = 4;
  constexpr size_t kStep = 4 * kLanes;
  const float* logits = c.logits.data();
  const size_t n = c.ids.size();
  const size_t whole = n / kStep * kStep;
  constexpr float kLowest = -std::numeric_limits<float>::infinity();
  auto at = [logits](size_t i) {  // candidates i..i+3
    V x;
    std::memcpy(&x, logits + i, sizeof x);
    return x;
  };
  auto larger = [](V a, V b) { return a > b ? a : b; };  // b where a is NaN
  V best[4];
  for (V& b : best) b = V{kLowest, kLowest, kLowest, kLowest};
  for (size_t i = 0; i < whole; i += kStep) {
    for (size_t v = 0; v < 4; ++v) best[v] = larger(at(i + v * kLanes), best[v]);
  }
  const V b = larger(larger(best[0], best[1]), larger(best[2], best[3]));
  float top = std::max(std::max(b[0], b[1]), std::max(b[2], b[3]));
  for (size_t i = whole; i < n; ++i) top = std::max(top, rank_key(logits[i]));
  size_t found = n;
  auto consider = [&](size_t i) {
    if (rank_key(logits[i]) == top && (found == n || c.ids[i] < c.ids[found])) found = i;
  };
  if (top == kLowest) {
    for (size_t i = 0; i < n; ++i) consider(i);
    return found;
  }
  const V target = {top, top, top, top};
  for (size_t i = 0; i < whole; i += kStep) {
    const auto hit = (at(i) == target) | (at(i + kLanes) == target) |
                     (at(i + 2 * kLanes) == target) | (at(i + 3 * kLanes) == target);
    if ((hit[0] | hit[1] | hit[2] | hit[3]) == 0) continue;
    for (size_t j = i; j < i + kStep; ++j) consider(j);
  }
  for (size_t i = whole; i < n; ++i) consider(i);
  return found;
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
