// cuda_attention.h — causal attention over the device KV cache.
//
// forward() stores the new K/V rows in their slots (kv_store.cu) and runs
// attention.cu for every query row: one kernel for prefill and decode,
// reading positions, slots and block tables from the step metadata the
// forward pass keeps on the device. In a decode step (every sequence adds
// one token) the attention kernel stores the rows itself, when `fuse`. A
// step of at most kMaxSplitRows rows, none of them a prompt's, whose rows
// see more than `split_above` positions splits each row's positions over
// many blocks (flash-decoding: AttentionArgs::splits), so that a long
// context fills the device rather than n_heads blocks of it.
// With `tiled`, a prompt chunk of kMinTiledRows rows or more of one
// sequence takes prefill_attention.cu, whose blocks share each K/V row they
// read among 32 query rows. `batch_invariant` (never with a split or tiles)
// attends every row with one block shape, so a row's output depends on its
// own sequence only.
#pragma once

#include <cstdint>
#include <memory>

#include "attention_split.h"
#include "cuda_device.h"
#include "duet/attention.h"
#include "forward_pass.h"

namespace duet::cuda {

class CudaAttention final : public Attention {
 public:
  // `split_above`: the backend's split_attention option (0: never split).
  // Allocates the split's partial results on `device` when it may split.
  CudaAttention(const AttentionSpec& spec, ForwardPass& pass, CudaDevice& device, bool fuse,
                int64_t split_above, bool tiled, bool batch_invariant);

  // Accepts what CudaKVCache stores, with matching heads, n_heads a
  // multiple of n_kv_heads and head_dim <= kMaxAttentionHeadDim.
  Support check(const KVCacheSpec& kv) const override;
  void forward(int32_t layer, const StepBatch& step, const TensorView& q, const TensorView& k,
               const TensorView& v, KVCache& kv, TensorView out) override;

 private:
  AttentionSpec spec_;
  ForwardPass& pass_;
  bool fuse_;
  int64_t split_above_;
  bool tiled_;
  bool batch_invariant_;
  std::unique_ptr<Buffer> partials_;  // null when split_above_ is 0
};

}  // namespace duet::cuda
