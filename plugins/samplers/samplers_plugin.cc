// The standard samplers, registered as one component plugin.
#include "duet/plugin.h"
#include "greedy.h"

namespace {

void register_samplers(duet::PluginRegistrar& r) {
  r.add_sampler("greedy", "pick the highest logit (ties: lowest id)", [](const duet::Options& o) {
    return std::make_unique<duet::samplers::Greedy>(o);
  });
}

}  // namespace

DUET_DEFINE_PLUGIN("samplers", "0.1.0", "standard sampler-chain links", nullptr, register_samplers)
