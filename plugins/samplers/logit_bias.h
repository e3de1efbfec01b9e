// logit_bias.h — adds a fixed bias to chosen tokens' logits, or bans them.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>

#include "duet/options.h"
#include "duet/sampler.h"

namespace duet::samplers {

// YAML: `- logit_bias: {13: -100, 42: 2.5, 50256: -inf}`.
//
// Every option key is a token id, an integer >= 0 written in plain decimal
// ("13"; not "+13" or "013"). Every value is a finite number added to that
// token's logit, or -inf (also YAML's -.inf) to ban the token: its
// candidate is removed. Ids that are not among the current candidates are
// ignored; core checks the ids against the vocabulary. No entries at all is
// allowed and changes nothing. The remaining candidates keep their order.
//
// apply() throws duet::Error(kInputRejected) when the bans would remove every
// remaining candidate (say, a ban placed after `top_k: 1`): the chain needs a
// candidate, and silently ignoring the ban would hide the mistake.
class LogitBias final : public Sampler {
 public:
  explicit LogitBias(const Options& options);
  std::string name() const override { return "logit_bias"; }
  void apply(Candidates& c, const SamplingContext& ctx) override;

 private:
  std::string path_;  // for errors from apply()
  std::unordered_map<int32_t, double> bias_;
};

}  // namespace duet::samplers
