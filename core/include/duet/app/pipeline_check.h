// duet/app/pipeline_check.h — proving, before anything runs, that a pipeline can.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "duet/app/model_hparams.h"
#include "duet/app/pipeline_config.h"
#include "duet/app/plugin_host.h"
#include "duet/backend.h"
#include "duet/export.h"
#include "duet/kv_cache.h"

namespace duet {

// One backend stages run on, as check_pipeline() established it.
struct DUET_API BackendPlacement {
  std::string name;             // its `backends:` key; "" for a pipeline's one `backend:`
  std::string backend;          // the backend component (the one chosen, for a choice)
  Options backend_options;      // its options
  std::string attention_impl;   // "default" resolved to the real name
  KVCacheSpec kv_cache;         // components.kv_cache, with the backend's own dtype if given
  KVCacheSpec window_cache;     // PipelineCheck::window_cache with that dtype
  uint64_t kv_cache_bytes = 0;  // both caches
  // The backend the check created and found able to run this placement;
  // Pipeline::build runs on it (and clears it), so a backend — its thread
  // pool, its GPU context — is made once. Null when the check found
  // problems. Must not outlive the PluginHost that made it.
  std::shared_ptr<Backend> instance;
};

// What check_pipeline() established, for reports and for building the run.
// The single-backend fields (backend ... kv_cache_bytes) describe the
// first stage's placement.
struct DUET_API PipelineCheck {
  ModelHParams hparams;
  std::string backend;      // the backend to run on (chosen, where the YAML lists several)
  Options backend_options;  // its options
  // Where backend.plugin is a list: "NAME: why" for each backend passed over
  // before the one chosen, in order.
  std::vector<std::string> backends_passed_over;
  std::string attention_impl;  // "default" resolved to the real name
  // The cache of every layer that attends to all positions; with window
  // rings (components.kv_cache.window_layers), of the other layers only.
  KVCacheSpec kv_cache;
  // The sliding-window layers' rings, a cache of its own: n_layers 0 when
  // those layers use kv_cache. Its capacity_tokens is the pool every
  // sequence's ring of window_ring_tokens slots comes from.
  KVCacheSpec window_cache;
  int32_t window_ring_tokens = 0;
  uint64_t kv_cache_bytes = 0;             // device bytes the caches will take
  std::vector<std::string> sampler_chain;  // link names in order
  std::vector<std::string> stages;         // stage names in order
  // Every backend a stage runs on, in order of first use, and each stage's
  // index into it. One entry for a pipeline with `backend:`.
  std::vector<BackendPlacement> placements;
  std::vector<size_t> stage_placement;
};

// Loads the plugins a pipeline can see: plugin_search_dirs() of its
// plugins.paths (relative to the YAML file's folder) and the defaults.
DUET_API void load_pipeline_plugins(const PipelineConfig& config, PluginHost& host);

// Opens the model (metadata only) and creates the backend (each of
// `backends:` a stage runs on), the attention implementation, the sampler
// links and the stages, and checks that the attention accepts the KV-cache
// spec, that the cache fits the model's context, and that each device has
// room for the weights and caches placed on it (kOutOfMemory naming the
// device, the need and the room) — without loading weights or allocating
// the cache. Where
// backend.plugin lists several backends, the first that passes these checks
// is chosen (BackendConfig); none passing is one kPlugin problem with a line
// per backend. Every problem
// is collected; if there are any, throws one duet::Error whose message has a
// line per problem (each prefixed with where it was written) and whose kind
// is that of the first.
DUET_API PipelineCheck check_pipeline(const PipelineConfig& config, const PluginHost& host);

}  // namespace duet
