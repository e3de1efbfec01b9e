// cuda_attention.h — causal attention over the device KV cache.
//
// forward() stores the new K/V rows in their slots (kv_store.cu) and runs
// attention.cu for every query row: one kernel for prefill and decode,
// reading positions, slots and block tables from the step metadata the
// forward pass keeps on the device. In a decode step (every sequence adds
// one token) the attention kernel stores the rows itself, when `fuse`.
#pragma once

#include "duet/attention.h"
#include "forward_pass.h"

namespace duet::cuda {

class CudaAttention final : public Attention {
 public:
  CudaAttention(const AttentionSpec& spec, ForwardPass& pass, bool fuse)
      : spec_(spec), pass_(pass), fuse_(fuse) {}

  // Accepts what CudaKVCache stores, with matching heads, n_heads a
  // multiple of n_kv_heads and head_dim <= kMaxAttentionHeadDim.
  Support check(const KVCacheSpec& kv) const override;
  void forward(int32_t layer, const StepBatch& step, const TensorView& q, const TensorView& k,
               const TensorView& v, KVCache& kv, TensorView out) override;

 private:
  AttentionSpec spec_;
  ForwardPass& pass_;
  bool fuse_;
};

}  // namespace duet::cuda
