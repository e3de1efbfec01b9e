// duet/backend.h — one compute backend: its device, its ops, and the
// attention and KV-cache implementations that run on that device.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "duet/attention.h"
#include "duet/device.h"
#include "duet/export.h"
#include "duet/kv_cache.h"
#include "duet/ops.h"

namespace duet {

// Created by a factory a backend plugin registers (see duet/plugin.h).
// Thread-safety: none; a pipeline drives its backend from one thread.
class DUET_API Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string name() const = 0;
  virtual Device& device() = 0;
  virtual Ops& ops() = 0;

  // Names of the attention implementations; the first is the default.
  virtual std::vector<std::string> attention_impls() const = 0;

  // Creates attention `impl` (one of attention_impls()). Throws
  // duet::Error(kConfig) for an unknown impl or a spec it cannot serve.
  virtual std::unique_ptr<Attention> create_attention(const std::string& impl,
                                                      const AttentionSpec& spec) = 0;

  // Names of the KV-cache storages; the first is the default.
  virtual std::vector<std::string> kv_cache_impls() const = 0;

  // Whether create_kv_cache(spec) would accept `spec` (impl, dtype,
  // geometry), without allocating anything; reasons say what to change.
  virtual Support check_kv_cache(const KVCacheSpec& spec) const = 0;

  // Core calls these around each forward pass (one StepBatch through every
  // layer, then the LM head); every op and attention call of the pass comes
  // between them, on the calling thread. A backend may use them to record
  // and replay the pass (a CUDA graph for decode steps) or to batch work.
  // The defaults do nothing.
  virtual void begin_forward(const StepBatch& step) { (void)step; }
  virtual void end_forward() {}

  // Allocates a cache for `spec`. Throws duet::Error(kConfig) for an unknown
  // impl or dtype and duet::Error(kOutOfMemory) when the device lacks room.
  virtual std::unique_ptr<KVCache> create_kv_cache(const KVCacheSpec& spec) = 0;

  // ABI 1.1. The KVLayerView::tile_slots a cache create_kv_cache(spec) makes
  // will report: 0 (the default) when it keeps slot rows, which any
  // attention reads; otherwise the backend's own tiles, which only its own
  // attention reads. Lets core refuse an attention plugin paired with a tiled
  // cache before anything is allocated.
  virtual int32_t kv_cache_tile_slots(const KVCacheSpec& spec) const {
    (void)spec;
    return 0;
  }
  // ABI 1.9. The cache create_kv_cache(spec) makes, but kept in slot rows
  // (KVLayerView::tile_slots 0) whatever kv_cache_tile_slots(spec) says:
  // what core gives a plugin's attention, which reads rows. Called only on
  // backends of plugins built against 1.9 or later. The default serves a
  // backend whose caches are always rows; one that keeps tiles overrides it.
  virtual std::unique_ptr<KVCache> create_kv_cache_rows(const KVCacheSpec& spec) {
    return create_kv_cache(spec);
  }
};

}  // namespace duet
