#include "backend_components.h"

#include <algorithm>

#include "duet/error.h"
#include "suggest.h"

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

std::shared_ptr<Attention> make_attention(Backend& backend, const PluginHost& host,
                                          const std::string& impl, const AttentionSpec& spec,
                                          const Options& options) {
  std::shared_ptr<Attention> attention;
  if (contains(backend.attention_impls(), impl)) {
    refuse_options(options, "attention '" + impl + "' of backend '" + backend.name() + "'");
    attention = backend.create_attention(impl, spec);
  } else if (contains(attention_names(backend, host), impl)) {
    attention = host.create_attention(backend, impl, spec, options);
  } else {
    throw unknown(backend, host, ComponentKind::kAttention, "components.attention.impl", impl,
                  attention_names(backend, host));
  }
  if (!attention) {
    throw Error(ErrorKind::kPlugin,
                "backend '" + backend.name() + "' returned no attention '" + impl + "'");
  }
  return attention;
}

Support check_kv_storage(Backend& backend, const PluginHost& host, const KVCacheSpec& spec,
                         const Options& options) {
  if (contains(backend.kv_cache_impls(), spec.impl)) {
    refuse_options(options,
                   "KV-cache storage '" + spec.impl + "' of backend '" + backend.name() + "'");
    return backend.check_kv_cache(spec);
  }
  if (contains(kv_cache_names(backend, host), spec.impl))
    return host.check_kv_cache(backend, spec, options);
  throw unknown(backend, host, ComponentKind::kKVCache, "components.kv_cache.impl", spec.impl,
                kv_cache_names(backend, host));
}

std::shared_ptr<KVCache> make_kv_cache(Backend& backend, const PluginHost& host,
                                       const KVCacheSpec& spec, const Options& options) {
  std::shared_ptr<KVCache> kv;
  if (contains(backend.kv_cache_impls(), spec.impl)) {
    refuse_options(options,
                   "KV-cache storage '" + spec.impl + "' of backend '" + backend.name() + "'");
    kv = backend.create_kv_cache(spec);
  } else if (contains(kv_cache_names(backend, host), spec.impl)) {
    kv = host.create_kv_cache(backend, spec, options);
  } else {
    throw unknown(backend, host, ComponentKind::kKVCache, "components.kv_cache.impl", spec.impl,
                  kv_cache_names(backend, host));
  }
  if (!kv) throw Error(ErrorKind::kPlugin, "backend '" + backend.name() + "' returned no KV cache");
  return kv;
}

std::string layout_mismatch(const Backend& backend, const PluginHost& host, const std::string& impl,
                            const KVCacheSpec& kv) {
  if (contains(backend.attention_impls(), impl)) return "";
  if (!contains(backend.kv_cache_impls(), kv.impl)) return "";  // a plugin's: slot rows
  if (host.backend_abi_minor(backend.name()) < 1) return "";    // no extension runs there
  const int32_t tile = backend.kv_cache_tile_slots(kv);
  if (tile == 0) return "";
  return "it reads KV caches stored as slot rows, but backend '" + backend.name() + "' keeps a " +
         std::string(dtype_name(kv.dtype)) + " cache in its own tiles of " + std::to_string(tile) +
         " slots; set components.kv_cache.dtype to another type, or use the backend's own "
         "attention";
}

}  // namespace duet
