// Speculative decoding stages, registered as one component plugin.
#include "duet/plugin.h"
#include "lookup_decode_stage.h"

namespace {

void register_stages(duet::PluginRegistrar& r) {
  using duet::speculative::LookupDecodeOptions;
  using duet::speculative::LookupDecodeStage;
  r.add_stage("lookup_decode",
              "decode loop that verifies draft tokens looked up in the context (prompt lookup); "
              "output identical to decode",
              [](const duet::Options& o) {
                return std::make_unique<LookupDecodeStage>(LookupDecodeOptions::parse(o));
              });
}

}  // namespace

DUET_DEFINE_PLUGIN("speculative", "0.1.0", "speculative decoding stages", nullptr, register_stages)
