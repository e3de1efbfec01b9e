#include "reference_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "duet/quant.h"

namespace duet::reference {

Support ReferenceAttention::check(const KVCacheSpec& kv) const {
  Support s = check_kv_rows(kv, "backend 'reference'", {DType::kF32, DType::kF16, DType::kQ8_0});
  s.merge(check_attention_geometry(spec_, kv, "attention 'full' of backend 'reference'"));
  s.merge(check_attention_window(spec_, "attention 'full' of backend 'reference'"));
  return s;
}

void ReferenceAttention::forward(int32_t layer, const StepBatch& step, const TensorView& q,
                                 const TensorView& k, const TensorView& v, KVCache& kv,
                                 TensorView out) {
  const int64_t hd = spec_.head_dim;
  const int64_t kv_row = spec_.n_kv_heads * hd;  // elements per cache slot
  const int64_t q_row = spec_.n_heads * hd;
  const int32_t group = spec_.n_heads / spec_.n_kv_heads;
  const int32_t block = kv.spec().block_tokens;
  const DType dtype = kv.spec().dtype;
  // Store every new row first, so rows of one step see each other causally.
  kv.write(layer, step, k, v);
  KVLayerView cache = kv.layer(layer);
  require_slot_rows(cache, "attention of backend 'reference'");
  const auto* cache_k = static_cast<const uint8_t*>(cache.k);
  const auto* cache_v = static_cast<const uint8_t*>(cache.v);

  // The positions [0, last] of a sequence, expanded to f32.
  std::vector<float> keys, values;
  const auto expand = [&](const SequenceStep& seq, int32_t last) {
    keys.resize(static_cast<size_t>((int64_t{last} + 1) * kv_row));
    values.resize(keys.size());
    for (int32_t p = 0; p <= last; ++p) {
      const auto slot =
          static_cast<uint64_t>(seq.block_table[static_cast<size_t>(p / block)]) * block +
          p % block;
      dequantize_row(dtype, cache_k + slot * cache.slot_bytes, keys.data() + p * kv_row, kv_row);
      dequantize_row(dtype, cache_v + slot * cache.slot_bytes, values.data() + p * kv_row, kv_row);
    }
  };

  std::vector<double> scores;
  std::vector<double> acc(static_cast<size_t>(hd));
  for (const SequenceStep& seq : step.sequences) {
    if (seq.n_tokens <= 0) continue;
    const auto rows = step.positions.begin() + seq.first_token;
    expand(seq, *std::max_element(rows, rows + seq.n_tokens));
    for (int32_t i = seq.first_token; i < seq.first_token + seq.n_tokens; ++i) {
      // Row i sees positions first..last: all of 0..last, or its window.
      const int32_t last = step.positions[static_cast<size_t>(i)];
      const int32_t first = spec_.window > 0 ? std::max(0, last - spec_.window + 1) : 0;
      scores.assign(static_cast<size_t>(last - first) + 1, 0.0);
      for (int32_t h = 0; h < spec_.n_heads; ++h) {
        const float* qh = q.as<const float>() + i * q_row + h * hd;
        const int64_t kv_head = h / group;
        double max_score = -INFINITY;
        for (int32_t p = first; p <= last; ++p) {
          const float* kp = keys.data() + p * kv_row + kv_head * hd;
          double dot = 0.0;
          for (int64_t d = 0; d < hd; ++d) dot += double{qh[d]} * double{kp[d]};
          scores[static_cast<size_t>(p - first)] = dot * double{spec_.scale};
          max_score = std::max(max_score, scores[static_cast<size_t>(p - first)]);
        }
        double total = 0.0;
        for (double& s : scores) total += (s = std::exp(s - max_score));
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int32_t p = first; p <= last; ++p) {
          const float* vp = values.data() + p * kv_row + kv_head * hd;
          const double w = scores[static_cast<size_t>(p - first)] / total;
          for (int64_t d = 0; d < hd; ++d) acc[static_cast<size_t>(d)] += w * double{vp[d]};
        }
        float* oh = out.as<float>() + i * q_row + h * hd;
        for (int64_t d = 0; d < hd; ++d) oh[d] = static_cast<float>(acc[static_cast<size_t>(d)]);
      }
    }
  }
}

}  // namespace duet::reference
