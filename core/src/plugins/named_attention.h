// named_attention.h — a plugin's attention as the pipeline holds it: the
// same calls, and whatever the plugin throws comes back naming it
// (internal to core).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "duet/attention.h"

namespace duet {

// Forwards every call to `inner`. A duet::Error it throws keeps its kind,
// with `label` ("attention 'x' (plugin 'y', components.attention.impl)")
// before its message; another exception becomes duet::Error(kPlugin) with
// the label; std::bad_alloc passes as it is.
//
// `checked` (debug.check_plugins): after each forward(), the cache is
// exported, KVCache::write stores the step's rows once more and the cache
// is exported again; any row that changed was left unwritten, or written
// otherwise than write() would, by the plugin: duet::Error(kPlugin) naming
// the layer, position and slot. Two exports of the cache per layer and
// step: for tests and conformance runs. REQUIRES (checked): a cache with
// KVCache::write (ABI 1.1 or later, as every in-tree one).
class NamedAttention final : public Attention {
 public:
  NamedAttention(std::shared_ptr<Attention> inner, std::string label, bool checked)
      : inner_(std::move(inner)), label_(std::move(label)), checked_(checked) {}
  Support check(const KVCacheSpec& kv) const override;
  void forward(int32_t layer, const StepBatch& step, const TensorView& q, const TensorView& k,
               const TensorView& v, KVCache& kv, TensorView out) override;

 private:
  // Throws when forward() left a row of `step` other than write() stores it.
  void check_rows_stored(int32_t layer, const StepBatch& step, const TensorView& k,
                         const TensorView& v, KVCache& kv);

  std::shared_ptr<Attention> inner_;
  std::string label_;
  bool checked_;
  std::vector<uint8_t> stored_, expected_;
};

}  // namespace duet
