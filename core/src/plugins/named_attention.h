// named_attention.h — a plugin's attention as the pipeline holds it: the
// same calls, and whatever the plugin throws comes back naming it
// (internal to core).
#pragma once

#include <memory>
#include <string>

#include "duet/attention.h"

namespace duet {

// Forwards every call to `inner`. A duet::Error it throws keeps its kind,
// with `label` ("attention 'x' (plugin 'y', components.attention.impl)")
// before its message; another exception becomes duet::Error(kPlugin) with
// the label; std::bad_alloc passes as it is.
class NamedAttention final : public Attention {
 public:
  NamedAttention(std::shared_ptr<Attention> inner, std::string label)
      : inner_(std::move(inner)), label_(std::move(label)) {}
  Support check(const KVCacheSpec& kv) const override;
  void forward(int32_t layer, const StepBatch& step, const TensorView& q, const TensorView& k,
               const TensorView& v, KVCache& kv, TensorView out) override;

 private:
  std::shared_ptr<Attention> inner_;
  std::string label_;
};

}  // namespace duet
