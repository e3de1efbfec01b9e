// duet/app/token_logprobs.h — how likely the model found a generated token and
// its best alternatives, as OpenAI's `logprobs` report it.
//
// Log-probabilities are those of the model's own distribution: the
// log-softmax of the logits the token was drawn from, before the sampler
// chain (penalties, temperature, truncation) changed them. This is what
// vLLM reports by default ("raw logprobs"); it does not depend on the
// request's sampling settings.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "duet/export.h"

namespace duet {

// The most alternatives a request may ask for (OpenAI's top_logprobs limit).
inline constexpr int32_t kMaxTopLogprobs = 20;

struct DUET_API TokenLogprob {
  int32_t token = 0;
  float logprob = 0.0f;  // natural log, <= 0
};

struct DUET_API TokenLogprobs {
  TokenLogprob chosen;            // the generated token
  std::vector<TokenLogprob> top;  // the most likely tokens, most likely first
};

// `chosen`'s log-probability under softmax(`logits`) and the `top` most
// likely tokens (ties go to the lower id). A logit of -inf
// has -inf. Requires 0 <= chosen < logits.size(), 0 <= top <=
// kMaxTopLogprobs and at least one finite logit.
// Exponentials in f32 (each at most 1), their sum in double.
DUET_API TokenLogprobs token_logprobs(std::span<const float> logits, int32_t chosen, int32_t top);

}  // namespace duet
