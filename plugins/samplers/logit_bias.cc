#include "logit_bias.h"

#include <charconv>
#include <cmath>
#include <limits>

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
  std::vector<int32_t> ids;
  std::vector<float> logits;
  ids.reserve(c.ids.size());
  logits.reserve(c.ids.size());
  for (size_t i = 0; i < c.ids.size(); ++i) {
    auto it = bias_.find(c.ids[i]);
    if (it == bias_.end()) {
      ids.push_back(c.ids[i]);
      logits.push_back(c.logits[i]);
    } else if (!std::isinf(it->second)) {
      ids.push_back(c.ids[i]);
      logits.push_back(static_cast<float>(c.logits[i] + it->second));
    }
  }
  // Checked before touching `c`, so the list is intact when this throws.
  if (ids.empty())
    throw Error(ErrorKind::kInputRejected,
                path_ + ": bans all " + std::to_string(c.ids.size()) +
                    " remaining candidates; put logit_bias before filters such as top_k, or ban "
                    "fewer tokens");
  c.ids = std::move(ids);
  c.logits = std::move(logits);
}

}  // namespace duet::samplers
