// onednn_plugin_host.h — one plugin host with the build's onednn plugin,
// for the tests that create onednn backends through the plugin.
#pragma once

#include <string>

#include "duet/app/plugin_host.h"

namespace duet::testing {

// The binary's one host; nullptr when the plugin is not built or is refused
// here. REQUIRES: DUET_BUILD_DIR defined by the test's build rule.
inline PluginHost* onednn_plugin_host() {
  static PluginHost* h = [] {
    auto* p = new PluginHost;
    if (!p->load(DUET_BUILD_DIR "/plugins/duet-onednn.so").loaded) {
      delete p;
      return static_cast<PluginHost*>(nullptr);
    }
    return p;
  }();
  return h;
}

// Whether the onednn backend's summary (`duet plugins`) mentions `text`.
inline bool onednn_summary_mentions(const std::string& text) {
  PluginHost* h = onednn_plugin_host();
  if (h == nullptr) return false;
  for (const ComponentInfo& c : h->components(ComponentKind::kBackend)) {
    if (c.name == "onednn") return c.summary.find(text) != std::string::npos;
  }
  return false;
}

// Whether the onednn plugin runs row tiles on AMX here, as its summary says
// ("AMX-INT8 tiles": the CPU has AMX-INT8 and the OS granted the tile
// state).
inline bool onednn_amx_usable() { return onednn_summary_mentions("AMX-INT8 tiles"); }

// Whether it also takes AMX-BF16's products (`amx: auto`), as the summary
// says ("AMX-BF16 from").
inline bool onednn_amx_bf16_usable() { return onednn_summary_mentions("AMX-BF16 from"); }

// Whether the plugin found AVX-512 on 256-bit units (Zen 4), as the cpu
// features at the end of its summary say ("avx512_split").
inline bool onednn_avx512_split() { return onednn_summary_mentions(" avx512_split"); }

// Whether the plugin's kernels run on `path` ("avx512_vnni", "avx2", ...):
// the CPU's best path unless DUET_CPU_PATH picked a lower one.
inline bool onednn_cpu_path_is(const std::string& path) {
  return onednn_summary_mentions("cpu path: " + path + " ");
}

}  // namespace duet::testing
