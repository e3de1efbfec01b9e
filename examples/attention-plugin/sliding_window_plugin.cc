// The sliding-window attention plugin: registers attention 'sliding_window'
// for the host backends 'reference' and 'onednn'.
//
// YAML:
//   components:
//     attention:
//       impl: sliding_window
//       options: {window: 256, sinks: 4}
// window (required, 1..16777216): positions each row attends to, its own
// and the window - 1 before it; sinks (0..16777216, default 0): leading
// positions every row attends to as well.
#include <duet/error.h>
#include <duet/plugin.h>

#include <memory>

#include "sliding_window_attention.h"

namespace {

constexpr int64_t kMaxPositions = 16777216;  // components.kv_cache.capacity_tokens' limit

std::unique_ptr<duet::Attention> make_sliding_window(duet::Backend& backend,
                                                     const duet::AttentionSpec& spec,
                                                     const duet::Options& options) {
  options.require("window", "the number of positions each token attends to, 1.." +
                                std::to_string(kMaxPositions));
  duet_example::SlidingWindow window;
  window.window = options.get_int("window", 0, 1, kMaxPositions);
  window.sinks = options.get_int("sinks", 0, 0, kMaxPositions);
  options.finish();
  if (!backend.device().host_accessible()) {
    throw duet::Error(duet::ErrorKind::kConfig,
                      "attention 'sliding_window' reads the KV cache on the host, but backend '" +
                          backend.name() + "' keeps it on device " + backend.device().name());
  }
  return std::make_unique<duet_example::SlidingWindowAttention>(spec, window);
}

void register_components(duet::PluginRegistrar& r) {
  for (const char* backend : {"reference", "onednn"}) {
    r.add_attention(backend, "sliding_window",
                    "the last `window` positions plus `sinks` leading ones (StreamingLLM)",
                    make_sliding_window);
  }
}

}  // namespace

DUET_DEFINE_PLUGIN("sliding-window", "1.0.0", "sliding-window attention with attention sinks",
                   nullptr, register_components)
