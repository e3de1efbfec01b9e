// frequency_penalty.h — subtracts an amount proportional to how often a
// token was recently seen, the additive penalty of the OpenAI API, vLLM and
// llama.cpp.
#pragma once

#include <cstdint>

#include "duet/options.h"
#include "duet/sampler.h"

namespace duet::samplers {

// YAML: `- frequency_penalty: 0.5` or
//       `- frequency_penalty: {penalty: 0.5, last_n: 64}`.
//
// Option `penalty` (shorthand `value`, required): a number in [-2, 2];
//   0 (sentinel) is off. Each candidate whose token occurs `count` times in
//   the window has penalty * count subtracted from its logit; a negative
//   penalty encourages repetition.
// Option `last_n`: the window, see penalty_window.h (default 64, 0 = off,
//   -1 = whole history). Unlike vLLM, which counts generated tokens only,
//   the window may reach into the prompt.
// Candidates not in the window, and the list itself, are left unchanged.
class FrequencyPenalty final : public Sampler {
 public:
  explicit FrequencyPenalty(const Options& options);
  std::string name() const override { return "frequency_penalty"; }
  void apply(Candidates& c, const SamplingContext& ctx) override;

 private:
  double penalty_ = 0.0;
  int64_t last_n_ = 0;
};

}  // namespace duet::samplers
