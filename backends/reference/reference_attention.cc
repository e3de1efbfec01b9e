#include "reference_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "reference_kv_cache.h"

namespace duet::reference {

Support ReferenceAttention::check(const KVCacheSpec& kv) const {
  Support s = ReferenceKVCache::check(kv);
  if (kv.n_kv_heads != spec_.n_kv_heads || kv.head_dim != spec_.head_dim) {
    s.reasons.push_back("KV cache holds " + std::to_string(kv.n_kv_heads) + " heads of " +
                        std::to_string(kv.head_dim) + " but attention needs " + std::to_string(spec_.n_kv_heads) +
                        " heads of " + std::to_string(spec_.head_dim));
  }
  if (spec_.n_kv_heads <= 0 || spec_.n_heads % spec_.n_kv_heads != 0) {
    s.reasons.push_back("query heads " + std::to_string(spec_.n_heads) + " are not a multiple of KV heads " +
                        std::to_string(spec_.n_kv_heads));
  }
  return s;
}

void ReferenceAttention::forward(int32_t layer, const StepBatch& step, const TensorView& q,
                                 const TensorView& k, const TensorView& v, KVCache& kv, TensorView out) {
  const int64_t hd = spec_.head_dim;
  const int64_t kv_row = spec_.n_kv_heads * hd;   // floats per cache slot
  const int64_t q_row = spec_.n_heads * hd;
  const int32_t group = spec_.n_heads / spec_.n_kv_heads;
  const int32_t block = kv.spec().block_tokens;
  KVLayerView cache = kv.layer(layer);
  auto* cache_k = static_cast<float*>(cache.k);
  auto* cache_v = static_cast<float*>(cache.v);

  // Store every new row first, so rows of one step see each other causally.
  for (int32_t i = 0; i < step.n_tokens; ++i) {
    const int64_t slot = step.slot_mapping[static_cast<size_t>(i)];
    std::memcpy(cache_k + slot * kv_row, k.as<const float>() + i * kv_row, static_cast<size_t>(kv_row) * sizeof(float));
    std::memcpy(cache_v + slot * kv_row, v.as<const float>() + i * kv_row, static_cast<size_t>(kv_row) * sizeof(float));
  }

  std::vector<double> scores;
  std::vector<double> acc(static_cast<size_t>(hd));
  for (const SequenceStep& seq : step.sequences) {
    for (int32_t i = seq.first_token; i < seq.first_token + seq.n_tokens; ++i) {
      const int32_t last = step.positions[static_cast<size_t>(i)];  // sees positions 0..last
      scores.assign(static_cast<size_t>(last) + 1, 0.0);
      for (int32_t h = 0; h < spec_.n_heads; ++h) {
        const float* qh = q.as<const float>() + i * q_row + h * hd;
        const int64_t kv_head = h / group;
        double max_score = -INFINITY;
        for (int32_t p = 0; p <= last; ++p) {
          const int64_t slot = int64_t{seq.block_table[static_cast<size_t>(p / block)]} * block + p % block;
          const float* kp = cache_k + slot * kv_row + kv_head * hd;
          double dot = 0.0;
          for (int64_t d = 0; d < hd; ++d) dot += double{qh[d]} * double{kp[d]};
          scores[static_cast<size_t>(p)] = dot * double{spec_.scale};
          max_score = std::max(max_score, scores[static_cast<size_t>(p)]);
        }
        double total = 0.0;
        for (double& s : scores) total += (s = std::exp(s - max_score));
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int32_t p = 0; p <= last; ++p) {
          const int64_t slot = int64_t{seq.block_table[static_cast<size_t>(p / block)]} * block + p % block;
          const float* vp = cache_v + slot * kv_row + kv_head * hd;
          const double w = scores[static_cast<size_t>(p)] / total;
          for (int64_t d = 0; d < hd; ++d) acc[static_cast<size_t>(d)] += w * double{vp[d]};
        }
        float* oh = out.as<float>() + i * q_row + h * hd;
        for (int64_t d = 0; d < hd; ++d) oh[d] = static_cast<float>(acc[static_cast<size_t>(d)]);
      }
    }
  }
}

}  // namespace duet::reference
