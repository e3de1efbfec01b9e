// The standard sampler-chain links, registered as one component plugin.
// Each link's header documents its options, sentinels and effect.
#include "dist.h"
#include "duet/plugin.h"
#include "frequency_penalty.h"
#include "greedy.h"
#include "logit_bias.h"
#include "min_p.h"
#include "presence_penalty.h"
#include "repetition_penalty.h"
#include "temperature.h"
#include "top_k.h"
#include "top_p.h"

namespace {

template <typename Link>
duet::SamplerFactory factory() {
  return [](const duet::Options& o) { return std::make_unique<Link>(o); };
}

void register_samplers(duet::PluginRegistrar& r) {
  using namespace duet::samplers;
  r.add_sampler("greedy", "pick the highest logit (ties: lowest id)", factory<Greedy>());
  r.add_sampler("temperature", "divide logits by t; t = 0 is greedy", factory<Temperature>());
  r.add_sampler("top_k", "keep the k highest logits; k = 0 is off", factory<TopK>());
  r.add_sampler("top_p", "keep the most likely tokens holding probability p; p = 1 is off",
                factory<TopP>());
  r.add_sampler("min_p", "keep tokens at least p times as likely as the best; p = 0 is off",
                factory<MinP>());
  r.add_sampler("repetition_penalty", "scale down recent tokens' logits; penalty = 1 is off",
                factory<RepetitionPenalty>());
  r.add_sampler("presence_penalty", "subtract penalty from recent tokens; penalty = 0 is off",
                factory<PresencePenalty>());
  r.add_sampler("frequency_penalty", "subtract penalty per recent occurrence; penalty = 0 is off",
                factory<FrequencyPenalty>());
  r.add_sampler("logit_bias", "add a bias to listed token ids; -inf bans", factory<LogitBias>());
  r.add_sampler("dist", "draw from the softmax of the candidates (seeded)", factory<Dist>());
}

}  // namespace

DUET_DEFINE_PLUGIN("samplers", "0.2.0", "standard sampler-chain links", nullptr, register_samplers)
