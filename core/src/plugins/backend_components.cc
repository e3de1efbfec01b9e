#include "plugins/backend_components.h"

#include <algorithm>

#include "duet/app/suggest.h"
#include "duet/error.h"
#include "duet/plugin.h"
#include "plugins/layer_attention.h"
#include "plugins/named_attention.h"
#include "plugins/named_kv_cache.h"

namespace duet {
namespace {

bool contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// Own names, then the available extensions of `kind` not shadowed by one.
std::vector<std::string> names(std::vector<std::string> own, const Backend& backend,
                               const PluginHost& host, ComponentKind kind) {
  for (const ComponentInfo& info : host.extensions(kind, backend.name())) {
    if (!contains(own, info.name) && host.unavailable_reason(info).empty())
      own.push_back(info.name);
  }
  return own;
}

// The error for a name neither the backend nor a plugin provides, with the
// reason when a plugin registered it but cannot serve now.
Error unknown(const Backend& backend, const PluginHost& host, ComponentKind kind,
              const std::string& key, const std::string& impl,
              const std::vector<std::string>& known) {
  for (const ComponentInfo& info : host.extensions(kind, backend.name())) {
    if (info.name == impl) {
      return Error(ErrorKind::kPlugin, key + " '" + impl + "' of plugin '" + info.plugin +
                                           "' cannot be used: " + host.unavailable_reason(info));
    }
  }
  return Error(ErrorKind::kConfig, key + " '" + impl + "' is not provided by backend '" +
                                       backend.name() + "' or a plugin for it" +
                                       did_you_mean(impl, known) +
                                       "; available: " + quoted_list(known));
}

void refuse_options(const Options& options, const std::string& what) {
  if (options.values().empty()) return;
  throw Error(ErrorKind::kConfig, options.path() + ": " + what + " takes no options, but '" +
                                      options.values().begin()->first + "' was given; remove " +
                                      options.path());
}

}  // namespace

std::vector<std::string> attention_names(const Backend& backend, const PluginHost& host) {
  return names(backend.attention_impls(), backend, host, ComponentKind::kAttention);
}

std::vector<std::string> kv_cache_names(const Backend& backend, const PluginHost& host) {
  return names(backend.kv_cache_impls(), backend, host, ComponentKind::kKVCache);
}

namespace {

// Whether `impl` is the backend's own (its options must then be empty) or
// a plugin's; throws unknown()'s error for neither.
enum class Source { kOwn, kPlugin };
Source source_of(const Backend& backend, const PluginHost& host, ComponentKind kind,
                 const std::string& impl, const Options& options) {
  const bool attention = kind == ComponentKind::kAttention;
  const auto own = attention ? backend.attention_impls() : backend.kv_cache_impls();
  if (contains(own, impl)) {
    refuse_options(options, std::string(attention ? "attention '" : "KV-cache storage '") + impl +
                                "' of backend '" + backend.name() + "'");
    return Source::kOwn;
  }
  const auto all = names(own, backend, host, kind);
  if (contains(all, impl)) return Source::kPlugin;
  throw unknown(backend, host, kind,
                attention ? "components.attention.impl" : "components.kv_cache.impl", impl, all);
}

// The plugin that registered extension `impl` of `kind` for `backend`.
std::string extension_plugin(const PluginHost& host, ComponentKind kind, const Backend& backend,
                             const std::string& impl) {
  for (const ComponentInfo& c : host.extensions(kind, backend.name())) {
    if (c.name == impl) return c.plugin;
  }
  return "";
}

}  // namespace

std::shared_ptr<Attention> make_attention(Backend& backend, const PluginHost& host,
                                          const std::string& impl, const AttentionSpec& spec,
                                          const Options& options, bool checked,
                                          const std::string& layers) {
  const bool own =
      source_of(backend, host, ComponentKind::kAttention, impl, options) == Source::kOwn;
  std::shared_ptr<Attention> attention = own ? backend.create_attention(impl, spec)
                                             : host.create_attention(backend, impl, spec, options);
  if (!attention) {
    throw Error(ErrorKind::kPlugin,
                "backend '" + backend.name() + "' returned no attention '" + impl + "'");
  }
  if (own) return attention;
  const std::string plugin = extension_plugin(host, ComponentKind::kAttention, backend, impl);
  return std::make_shared<NamedAttention>(std::move(attention),
                                          "attention '" + impl + "' (plugin '" + plugin +
                                              "', components.attention.impl" +
                                              (layers.empty() ? "" : ", " + layers) + ")",
                                          checked);
}

std::shared_ptr<Attention> make_model_attention(Backend& backend, const PluginHost& host,
                                                const std::string& impl,
                                                const ModelHParams& hparams, const Options& options,
                                                bool checked, WindowCache window_cache) {
  const AttentionSpec full{hparams.n_heads, hparams.n_kv_heads, hparams.head_dim,
                           hparams.attention_scale};
  if (!hparams.layer_windows.empty() &&
      hparams.layer_windows.size() != static_cast<size_t>(hparams.n_layers)) {
    throw Error(ErrorKind::kInternal,
                "the model has " + std::to_string(hparams.n_layers) + " layers and " +
                    std::to_string(hparams.layer_windows.size()) + " layer windows");
  }
  std::vector<int32_t> windows;  // distinct, in layer order
  std::vector<int32_t> window_of_layer;
  for (const int32_t w : hparams.layer_windows) {
    const auto at = std::find(windows.begin(), windows.end(), w);
    window_of_layer.push_back(static_cast<int32_t>(at - windows.begin()));
    if (at == windows.end()) windows.push_back(w);
  }
  if (windows.size() <= 1 && (windows.empty() || windows[0] == 0))
    return make_attention(backend, host, impl, full, options, checked);

  const bool own =
      source_of(backend, host, ComponentKind::kAttention, impl, options) == Source::kOwn;
  const uint32_t backend_minor = host.backend_abi_minor(backend.name());
  const uint32_t minor =
      own ? backend_minor
          : host.extension_abi_minor(ComponentKind::kAttention, backend.name(), impl);
  if (minor >= 6 && backend_minor < 6) {
    // The plugin's attention may hand the spec to the backend's own, which
    // would not know the window.
    throw Error(ErrorKind::kPlugin,
                "attention '" + impl + "' (plugin '" +
                    extension_plugin(host, ComponentKind::kAttention, backend, impl) +
                    "') runs on backend '" + backend.name() + "', built against Duet ABI 1." +
                    std::to_string(backend_minor) + ", which cannot run " + hparams.architecture +
                    "'s sliding-window layers (AttentionSpec::window, ABI 1.6); rebuild the "
                    "backend's plugin against this Duet SDK");
  }
  if (minor < 6) {
    const std::string who =
        own ? "of backend '" + backend.name() + "' ("
            : "(plugin '" + extension_plugin(host, ComponentKind::kAttention, backend, impl) +
                  "', ";
    throw Error(ErrorKind::kPlugin,
                "attention '" + impl + "' " + who + "built against Duet ABI 1." +
                    std::to_string(minor) + ") cannot run " + hparams.architecture +
                    "'s sliding-window layers (" + std::to_string(hparams.sliding_window) +
                    " positions), which need ABI 1.6 or later (AttentionSpec::window); rebuild "
                    "the plugin against this Duet SDK");
  }
  std::vector<std::shared_ptr<Attention>> by_window;
  for (const int32_t w : windows) {
    AttentionSpec spec = full;
    spec.window = w;
    // One attention per window: a failure's label says which layers it served.
    const std::string layers = w > 0 ? "layers with a " + std::to_string(w) + "-position window"
                                     : "layers without a window";
    by_window.push_back(make_attention(backend, host, impl, spec, options, checked, layers));
  }
  if (by_window.size() == 1 && window_cache.spec.n_layers == 0) return by_window.front();
  return std::make_shared<LayerAttention>(std::move(by_window), std::move(window_of_layer), windows,
                                          std::move(window_cache));
}

Support check_kv_storage(Backend& backend, const PluginHost& host, const KVCacheSpec& spec,
                         const Options& options) {
  return source_of(backend, host, ComponentKind::kKVCache, spec.impl, options) == Source::kOwn
             ? backend.check_kv_cache(spec)
             : host.check_kv_cache(backend, spec, options);
}

std::shared_ptr<KVCache> make_kv_cache(Backend& backend, const PluginHost& host,
                                       const KVCacheSpec& spec, const Options& options,
                                       const std::string& attention_impl) {
  if (source_of(backend, host, ComponentKind::kKVCache, spec.impl, options) == Source::kOwn) {
    const bool rows = !contains(backend.attention_impls(), attention_impl) &&
                      host.backend_makes_kv_rows(backend.name());
    std::shared_ptr<KVCache> kv(rows ? backend.create_kv_cache_rows(spec)
                                     : backend.create_kv_cache(spec));
    if (!kv)
      throw Error(ErrorKind::kPlugin, "backend '" + backend.name() + "' returned no KV cache");
    return kv;
  }
  std::shared_ptr<KVCache> kv = host.create_kv_cache(backend, spec, options);
  const std::string plugin = extension_plugin(host, ComponentKind::kKVCache, backend, spec.impl);
  const std::string label =
      "KV-cache storage '" + spec.impl + "' (plugin '" + plugin + "', components.kv_cache.impl)";
  if (!kv) throw Error(ErrorKind::kPlugin, label + " returned no cache");
  return std::make_shared<NamedKVCache>(
      std::move(kv), label,
      host.extension_abi_minor(ComponentKind::kKVCache, backend.name(), spec.impl));
}

uint32_t kv_cache_abi_minor(Backend& backend, const PluginHost& host, const KVCacheSpec& spec,
                            const Options& options) {
  return source_of(backend, host, ComponentKind::kKVCache, spec.impl, options) == Source::kOwn
             ? host.backend_abi_minor(backend.name())
             : DUET_ABI_MINOR;  // core's NamedKVCache, which adapts to the plugin's
}

std::string layout_mismatch(const Backend& backend, const PluginHost& host, const std::string& impl,
                            const KVCacheSpec& kv) {
  if (contains(backend.attention_impls(), impl)) return "";
  if (!contains(backend.kv_cache_impls(), kv.impl)) return "";  // a plugin's: slot rows
  if (host.backend_abi_minor(backend.name()) < 1) return "";    // no extension runs there
  if (host.backend_makes_kv_rows(backend.name())) return "";    // asked for rows (make_kv_cache)
  const int32_t tile = backend.kv_cache_tile_slots(kv);
  if (tile == 0) return "";
  return "it reads KV caches stored as slot rows, but backend '" + backend.name() + "' keeps a " +
         std::string(dtype_name(kv.dtype)) + " cache in its own tiles of " + std::to_string(tile) +
         " slots; set components.kv_cache.dtype to another type, or use the backend's own "
         "attention";
}

}  // namespace duet
