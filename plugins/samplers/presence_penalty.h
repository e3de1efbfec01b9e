// presence_penalty.h — subtracts a fixed amount from every recently seen
// token, the additive penalty of the OpenAI API, vLLM and llama.cpp.
#pragma once

#include <cstdint>

#include "duet/options.h"
#include "duet/sampler.h"

namespace duet::samplers {

// YAML: `- presence_penalty: 0.5` or
//       `- presence_penalty: {penalty: 0.5, last_n: 64}`.
//
// Option `penalty` (shorthand `value`, required): a number in [-2, 2];
//   0 (sentinel) is off. Each candidate whose token occurs in the window at
//   least once has `penalty` subtracted from its logit, once; a negative
//   penalty encourages repetition.
// Option `last_n`: the window, see penalty_window.h (default 64, 0 = off,
//   -1 = whole history). Unlike vLLM, which counts generated tokens only,
//   the window may reach into the prompt.
// Candidates not in the window, and the list itself, are left unchanged.
class PresencePenalty final : public Sampler {
 public:
  explicit PresencePenalty(const Options& options);
  std::string name() const override { return "presence_penalty"; }
  void apply(Candidates& c, const SamplingContext& ctx) override;

 private:
  double penalty_ = 0.0;
  int64_t last_n_ = 0;
};

}  // namespace duet::samplers
