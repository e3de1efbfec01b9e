// reference_attention.h — causal attention over the cache, written as the
// textbook formula: for each query row and head, scores against every cached
// position it may see, a softmax, and the weighted sum of values.
#pragma once

#include "duet/attention.h"

namespace duet::reference {

class ReferenceAttention final : public Attention {
 public:
  explicit ReferenceAttention(const AttentionSpec& spec) : spec_(spec) {}

  Support check(const KVCacheSpec& kv) const override;
  void forward(int32_t layer, const StepBatch& step, const TensorView& q, const TensorView& k,
               const TensorView& v, KVCache& kv, TensorView out) override;

 private:
  AttentionSpec spec_;
};

}  // namespace duet::reference
