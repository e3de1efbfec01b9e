#include "cuda_attention.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "cuda_kv_cache.h"

namespace duet::cuda {

CudaAttention::CudaAttention(const AttentionSpec& spec, ForwardPass& pass, CudaDevice& device,
                             bool fuse, int64_t split_above, bool tiled, bool batch_invariant)
    : spec_(spec),
      pass_(pass),
      fuse_(fuse),
      split_above_(batch_invariant ? 0 : split_above),
      tiled_(tiled && !batch_invariant),
      batch_invariant_(batch_invariant) {
  if (split_above_ > 0) {
    partials_ = device.allocate(sizeof(float) * kMaxSplitRows * kMaxAttentionSplits *
                                static_cast<uint64_t>(spec_.n_heads) *
                                static_cast<uint64_t>(spec_.head_dim + 2));
  }
}

Support CudaAttention::check(const KVCacheSpec& kv) const {
  Support s = check_kv_rows(kv, "backend 'cuda'", {DType::kF32, DType::kF16, DType::kQ8_0});
  s.merge(check_attention_geometry(spec_, kv, "attention 'full' of backend 'cuda'"));
  if (spec_.head_dim > kMaxAttentionHeadDim) {
    s.reasons.push_back("head dimension " + std::to_string(spec_.head_dim) +
                        " exceeds the cuda attention's " + std::to_string(kMaxAttentionHeadDim));
  }
  s.merge(check_attention_window(spec_, "attention 'full' of backend 'cuda'"));
  return s;
}

void CudaAttention::forward(int32_t layer, const StepBatch& step, const TensorView& q,
                            const TensorView& k, const TensorView& v, KVCache& kv, TensorView out) {
  const StepMetadataView meta = pass_.metadata(step);
  const KVLayerView cache = kv.layer(layer);
  require_slot_rows(cache, "attention of backend 'cuda'");
  const CacheType type = cache_type(kv.spec().dtype);
  // In a decode step over an f32 cache the attention kernel stores the new
  // rows itself; its vector loads need 16-byte aligned rows. An f16 or q8_0
  // cache stores first, so that the newest row is read back rounded as the
  // others are.
  bool decode = fuse_ && type == CacheType::kF32 && step.n_prefill_tokens == 0;
  for (const SequenceStep& s : step.sequences) decode = decode && s.n_tokens == 1;
  decode = decode && reinterpret_cast<uintptr_t>(k.data) % 16 == 0 &&
           reinterpret_cast<uintptr_t>(v.data) % 16 == 0;

  AttentionCall call;
  if (!decode) {
    call.store = KvStoreArgs{k.as<const float>(),
                             v.as<const float>(),
                             cache.k,
                             cache.v,
                             type,
                             meta.row_slot,
                             step.n_tokens,
                             spec_.n_kv_heads * spec_.head_dim};
  }
  AttentionArgs& a = call.attend;
  a.q = q.as<const float>();
  a.out = out.as<float>();
  a.k_cache = cache.k;
  a.v_cache = cache.v;
  a.cache = type;
  a.row_position = meta.row_position;
  a.row_table = meta.row_table;
  a.block_tables = meta.block_tables;
  if (decode) {
    a.k_new = k.as<const float>();
    a.v_new = v.as<const float>();
    a.row_slot = meta.row_slot;
  }
  a.n_tokens = step.n_tokens;
  a.n_heads = spec_.n_heads;
  a.n_kv_heads = spec_.n_kv_heads;
  a.head_dim = spec_.head_dim;
  a.block_tokens = kv.spec().block_tokens;
  a.scale = spec_.scale;
  a.window = spec_.window;
  a.batch_invariant = batch_invariant_;
  if (partials_ != nullptr && step.n_prefill_tokens == 0 && step.n_tokens <= kMaxSplitRows) {
    int64_t positions = 0;  // the most any row sees
    for (int32_t p : step.positions) positions = std::max<int64_t>(positions, int64_t{p} + 1);
    const AttentionSplit split = choose_attention_split(positions, split_above_);
    if (split.splits > 1) {
      a.partials = static_cast<float*>(partials_->data());
      a.splits = split.splits;
      a.split_positions = split.split_positions;
    }
  }
  // Prompt chunks of kMinTiledRows rows or more take the tiled kernel, the
  // other rows the per-row one; the first launch stores every row's K/V.
  const std::vector<AttentionRows> launches = attention_rows(
      step, tiled_ && !decode && a.splits == 1 && spec_.head_dim <= kMaxTiledHeadDim);
  for (size_t i = 0; i < launches.size(); ++i) {
    AttentionCall part = call;
    if (i > 0) part.store = KvStoreArgs{};
    part.attend.first_row = launches[i].first_row;
    part.attend.n_tokens = launches[i].n_rows;
    part.attend.tiled = launches[i].tiled;
    pass_.submit(part);
  }
}

}  // namespace duet::cuda
