// The reference backend's plugin entry: registers the "reference" backend.
#include <memory>

#include "duet/plugin.h"
#include "reference_backend.h"

namespace {

void register_reference(duet::PluginRegistrar& registrar) {
  registrar.add_backend(
      "reference",
      "plain single-threaded f32 C++ on the host (KV cache f32, f16 or q8_0); the yardstick for "
      "other backends",
      [](const duet::Options& options) -> std::unique_ptr<duet::Backend> {
        // The reference backend has no settings (not even `threads`: it is
        // single-threaded by design), so every key is rejected.
        options.finish();
        return std::make_unique<duet::reference::ReferenceBackend>();
      });
}

}  // namespace

DUET_DEFINE_PLUGIN("reference", "0.1.0", "plain f32 C++ yardstick backend", nullptr,
                   register_reference)
