#include "logit_bias.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "duet/error.h"
#include "link_options.h"

namespace duet::samplers {
namespace {

int32_t parse_token_id(const Options& options, const std::string& key) {
  if (key == kShorthandKey)
    throw Error(ErrorKind::kConfig, options.path() +
                                        ": expected a map from token id to bias such as " +
                                        "'- logit_bias: {13: -100}', found the single value '" +
                                        options.values().at(key) + "'");
  int32_t id = -1;
  const char* end = key.data() + key.size();
  auto [ptr, ec] = std::from_chars(key.data(), end, id);
  // The round trip rejects "013" and "+13", which would otherwise let two
  // keys name the same token.
  if (ec != std::errc() || ptr != end || id < 0 || std::to_string(id) != key)
    throw Error(ErrorKind::kConfig, key_path(options, key) +
                                        ": expected a token id (an integer in [0, " +
                                        std::to_string(std::numeric_limits<int32_t>::max()) +
                                        "] such as '13') as the key, found '" + key + "'");
  return id;
}

double parse_bias(const Options& options, const std::string& key, const std::string& text) {
  if (text == "-inf" || text == "-.inf" || text == "-.Inf" || text == "-.INF")
    return -std::numeric_limits<double>::infinity();
  double value = 0.0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end || !std::isfinite(value))
    throw Error(ErrorKind::kConfig, key_path(options, key) +
                                        ": expected a finite number, or -inf to ban the token, "
                                        "found '" +
                                        text + "'");
  return value;
}

}  // namespace

LogitBias::LogitBias(const Options& options) : path_(options.path()) {
  for (const auto& [key, text] : options.values()) {
    options.get_string(key, "");  // marks the key as used for finish()
    bias_[parse_token_id(options, key)] = parse_bias(options, key, text);
  }
  options.finish();
}

void LogitBias::apply(Candidates& c, const SamplingContext&) {
  if (bias_.empty()) return;
  const auto n = static_cast<int64_t>(c.ids.size());
  // Where the biased ids sit. Candidate ids are unique, so an id found at
  // its own index is there alone — the first link of a chain sees the
  // whole vocabulary in id order, and a few lookups replace a pass over it
  // (a pass with a hash lookup per candidate took 14% of `duet serve`'s
  // compute thread with three banned tokens and 16 sequences). Ids not
  // found so are looked for in one pass over the candidates.
  std::vector<std::pair<int64_t, double>> hits;  // (position, bias)
  std::vector<int32_t> unplaced;
  for (const auto& [id, bias] : bias_) {
    if (id < n && c.ids[static_cast<size_t>(id)] == id) {
      hits.emplace_back(id, bias);
    } else {
      unplaced.push_back(id);
    }
  }
  if (!unplaced.empty()) {
    std::sort(unplaced.begin(), unplaced.end());
    for (int64_t i = 0; i < n; ++i) {
      const int32_t id = c.ids[static_cast<size_t>(i)];
      if (id < unplaced.front() || id > unplaced.back() ||
          !std::binary_search(unplaced.begin(), unplaced.end(), id)) {
        continue;
      }
      hits.emplace_back(i, bias_.at(id));
    }
  }
  std::vector<int64_t> bans;  // positions of banned candidates
  for (const auto& [at, bias] : hits) {
    if (std::isinf(bias)) bans.push_back(at);
  }
  // Checked before touching `c`, so the list is intact when this throws.
  if (static_cast<int64_t>(bans.size()) == n)
    throw Error(ErrorKind::kInputRejected,
                path_ + ": bans all " + std::to_string(n) +
                    " remaining candidates; put logit_bias before filters such as top_k, or ban "
                    "fewer tokens");
  for (const auto& [at, bias] : hits) {
    float& logit = c.logits[static_cast<size_t>(at)];
    if (!std::isinf(bias)) logit = static_cast<float>(logit + bias);
  }
  if (bans.empty()) return;
  // The banned candidates out, the others in their order: each stretch
  // between two bans moves down once.
  std::sort(bans.begin(), bans.end());
  int64_t to = bans.front();
  for (size_t k = 0; k < bans.size(); ++k) {
    const int64_t from = bans[k] + 1;
    const int64_t end = k + 1 < bans.size() ? bans[k + 1] : n;
    std::copy(c.ids.begin() + from, c.ids.begin() + end, c.ids.begin() + to);
    std::copy(c.logits.begin() + from, c.logits.begin() + end, c.logits.begin() + to);
    to += end - from;
  }
  c.ids.resize(static_cast<size_t>(to));
  c.logits.resize(static_cast<size_t>(to));
}

}  // namespace duet::samplers
