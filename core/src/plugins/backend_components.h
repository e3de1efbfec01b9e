// backend_components.h — the attention and KV-cache storage a pipeline gets
// on one backend: one of the backend's own, or one a plugin registered for
// it (PluginRegistrar::add_attention / add_kv_cache). check_pipeline and
// Pipeline::build both go through here, so what validates is what runs.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "duet/app/model_hparams.h"
#include "duet/app/plugin_host.h"
#include "duet/backend.h"
#include "duet/options.h"
#include "plugins/layer_attention.h"

namespace duet {

// The names a pipeline may give components.attention.impl on `backend`:
// the backend's own (the first is "default"), then those plugins registered
// for it that are available, in name order.
std::vector<std::string> attention_names(const Backend& backend, const PluginHost& host);
std::vector<std::string> kv_cache_names(const Backend& backend, const PluginHost& host);

// Creates attention `impl` (a name from attention_names). The backend's own
// take no options: any given are a duet::Error(kConfig) naming them.
// Throws duet::Error(kConfig) for an unknown name (listing the known ones)
// and passes on the factories' errors. A plugin's attention comes wrapped
// in a NamedAttention, `checked` (debug.check_plugins) or not, whose label
// ends with `layers` when that is not empty (which layers it serves).
std::shared_ptr<Attention> make_attention(Backend& backend, const PluginHost& host,
                                          const std::string& impl, const AttentionSpec& spec,
                                          const Options& options, bool checked = false,
                                          const std::string& layers = "");

// The attention a model runs: make_attention() once for each distinct
// window of hparams.layer_windows (AttentionSpec::window), and, when the
// layers differ, one LayerAttention handing each layer to its window's. A
// window for an attention whose plugin (the backend's, for its own) was
// built against ABI 1.5 or older is a duet::Error(kPlugin) naming both.
// With a window cache (window_cache.spec.n_layers > 0), the window layers
// run on it (LayerAttention).
std::shared_ptr<Attention> make_model_attention(Backend& backend, const PluginHost& host,
                                                const std::string& impl,
                                                const ModelHParams& hparams, const Options& options,
                                                bool checked = false,
                                                WindowCache window_cache = {});

// Whether storage spec.impl can hold `spec` with `options`, allocating
// nothing; then the storage itself — for attention `attention_impl`: a
// plugin's reads slot rows, so the backend's own storage is asked for them
// (Backend::create_kv_cache_rows, backends of ABI 1.9 or later; with older
// ones layout_mismatch refuses a pair that would need it). Errors as
// make_attention's.
Support check_kv_storage(Backend& backend, const PluginHost& host, const KVCacheSpec& spec,
                         const Options& options);
std::shared_ptr<KVCache> make_kv_cache(Backend& backend, const PluginHost& host,
                                       const KVCacheSpec& spec, const Options& options,
                                       const std::string& attention_impl);
// A plugin's storage comes wrapped in a NamedKVCache (its failures name it).
// The Duet ABI minor version make_kv_cache()'s cache implements: the
// backend's for its own; core's for a plugin's (the wrapper calls what the
// plugin's version has).
uint32_t kv_cache_abi_minor(Backend& backend, const PluginHost& host, const KVCacheSpec& spec,
                            const Options& options);

// Why attention `impl` cannot read a cache the storage `kv.impl` keeps:
// an attention a plugin registered reads slot rows only, and the own
// storage of a backend built before ABI 1.9 (which cannot be asked for
// rows) may keep its own tiles (Backend::kv_cache_tile_slots). Empty when
// it can (the attention's own check() comes on top).
std::string layout_mismatch(const Backend& backend, const PluginHost& host, const std::string& impl,
                            const KVCacheSpec& kv);

}  // namespace duet
