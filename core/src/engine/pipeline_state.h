// pipeline_state.h — what a built Pipeline is made of (internal to core):
// shared by the pipeline's own code and the batching scheduler.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "duet/app/chat_template.h"
#include "duet/app/gguf.h"
#include "duet/app/pipeline.h"
#include "duet/app/scheduler.h"
#include "duet/attention.h"
#include "duet/backend.h"
#include "duet/stage.h"
#include "engine/stage_options.h"
#include "kv/kv_allocator.h"
#include "kv/kv_residency.h"
#include "models/model.h"
#include "sampling/sampler_chain.h"

namespace duet {

struct DUET_LOCAL Pipeline::State {
  PipelineConfig config;
  PipelineCheck check;
  std::shared_ptr<const GgufFile> file;
  std::unique_ptr<Tokenizer> tokenizer;
  std::optional<ChatTemplate> chat;
  // One per PipelineCheck::placements entry: a backend with the weights
  // bound, its cache and its attention. Members go in reverse order, so the
  // backend outlives what was made on it.
  struct Placement {
    std::shared_ptr<Backend> backend;
    std::unique_ptr<Model> model;
    std::shared_ptr<KVCache> kv;
    // The sliding-window layers' rings (PipelineCheck::window_cache); null
    // when `kv` holds every layer.
    std::shared_ptr<KVCache> window_kv;
    uint32_t kv_abi_minor = 0;  // of the plugin whose code `kv` runs (kv_cache_abi_minor)
    std::shared_ptr<Attention> attention;
  };
  std::vector<Placement> placements;
  std::unique_ptr<KVAllocator> allocator;
  // Which placement's cache holds each block's current contents; null with
  // one placement. Sessions and schedulers of the pipeline keep it (the
  // prefix cache shares blocks between them over time).
  std::unique_ptr<KVResidency> residency;
  int32_t next_sequence = 0;  // the allocator id the next session or request gets
  const PluginHost* host = nullptr;
  PrefillOptions prefill;         // stages[0]'s
  std::shared_ptr<Stage> decode;  // the stage after prefill; null: a scoring pipeline
  double load_seconds = 0.0;
  // Pipeline::engine(), made on first use; last, so that it goes first (it
  // returns its sequences' blocks to `allocator`).
  std::unique_ptr<Scheduler> engine;

  // A sampler chain of fresh links (a link may keep state, so each session
  // and request has its own), each link's options those of the pipeline's
  // chain with `overrides[link name]` set over them. Throws
  // duet::Error(kConfig) naming the key for a rejected option, and for an
  // override of a link the chain does not have.
  // A request's `grammar` options, when not empty, make a 'grammar' link
  // placed first (RequestSettings::grammar).
  std::unique_ptr<SamplerChain> make_chain(
      uint64_t seed, const SamplerOverrides& overrides,
      const std::map<std::string, std::string>& grammar = {}) const;
};

}  // namespace duet
