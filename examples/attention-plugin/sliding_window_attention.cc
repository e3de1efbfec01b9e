#include "sliding_window_attention.h"

#include <duet/quant.h>

#include <algorithm>
#include <cmath>
#include <string>

namespace duet_example {

duet::Support SlidingWindowAttention::check(const duet::KVCacheSpec& kv) const {
  duet::Support s = duet::check_kv_rows(kv, "attention 'sliding_window'",
                                        {duet::DType::kF32, duet::DType::kF16, duet::DType::kQ8_0});
  s.merge(duet::check_attention_geometry(spec_, kv, "attention 'sliding_window'"));
  if (spec_.window > 0) {
    // Its one window, on every layer, is not the model's per-layer one.
    s.reasons.push_back(
        "attention 'sliding_window' cannot run the model's own sliding-window "
        "layers (" +
        std::to_string(spec_.window) + " positions); use attention 'full'");
  }
  return s;
}

void SlidingWindowAttention::forward(int32_t layer, const duet::StepBatch& step,
                                     const duet::TensorView& q, const duet::TensorView& k,
                                     const duet::TensorView& v, duet::KVCache& kv,
                                     duet::TensorView out) {
  const int64_t hd = spec_.head_dim;
  const int64_t kv_row = int64_t{spec_.n_kv_heads} * hd;  // elements per cache slot
  const int64_t q_row = int64_t{spec_.n_heads} * hd;
  const int32_t group = spec_.n_heads / spec_.n_kv_heads;
  const int64_t block = kv.spec().block_tokens;
  const duet::DType dtype = kv.spec().dtype;
  // Store every new row first, so rows of one step see each other causally.
  kv.write(layer, step, k, v);
  const duet::KVLayerView cache = kv.layer(layer);
  duet::require_slot_rows(cache, "attention 'sliding_window'");
  const auto* cache_k = static_cast<const uint8_t*>(cache.k);
  const auto* cache_v = static_cast<const uint8_t*>(cache.v);
  acc_.resize(static_cast<size_t>(hd));

  for (const duet::SequenceStep& seq : step.sequences) {
    if (seq.n_tokens <= 0) continue;
    // Rows are in positional order, so every row attends within the sinks
    // before the first row's window, [0, n_sinks), and [lo, last]; expand
    // those positions once, sinks first, at index `slot_index(p)`.
    const int64_t first = step.positions[static_cast<size_t>(seq.first_token)];
    const int64_t last = step.positions[static_cast<size_t>(seq.first_token + seq.n_tokens - 1)];
    const int64_t lo = window_.window_start(first);
    const int64_t n_sinks = window_.sink_end(first);
    const auto index = [&](int64_t p) { return p < lo ? p : n_sinks + (p - lo); };
    const auto n_expanded = static_cast<size_t>(n_sinks + (last - lo + 1));
    keys_.resize(n_expanded * static_cast<size_t>(kv_row));
    values_.resize(keys_.size());
    const auto expand = [&](int64_t p) {
      const auto slot = static_cast<uint64_t>(seq.block_table[static_cast<size_t>(p / block)]) *
                            static_cast<uint64_t>(block) +
                        static_cast<uint64_t>(p % block);
      dequantize_row(dtype, cache_k + slot * cache.slot_bytes, keys_.data() + index(p) * kv_row,
                     kv_row);
      dequantize_row(dtype, cache_v + slot * cache.slot_bytes, values_.data() + index(p) * kv_row,
                     kv_row);
    };
    for (int64_t p = 0; p < n_sinks; ++p) expand(p);
    for (int64_t p = lo; p <= last; ++p) expand(p);

    for (int32_t i = seq.first_token; i < seq.first_token + seq.n_tokens; ++i) {
      const int64_t pos = step.positions[static_cast<size_t>(i)];
      const int64_t sink_end = window_.sink_end(pos);
      const int64_t start = window_.window_start(pos);
      // The attended positions in increasing order, as expanded indices:
      // [0, sink_end) then [start, pos].
      const int64_t n_attended = sink_end + (pos - start + 1);
      const auto attended = [&](int64_t j) {
        return index(j < sink_end ? j : start + j - sink_end);
      };
      scores_.assign(static_cast<size_t>(n_attended), 0.0);
      for (int32_t h = 0; h < spec_.n_heads; ++h) {
        const float* qh = q.as<const float>() + i * q_row + h * hd;
        const int64_t kv_head = h / group;
        double max_score = -INFINITY;
        for (int64_t j = 0; j < n_attended; ++j) {
          const float* kp = keys_.data() + attended(j) * kv_row + kv_head * hd;
          double dot = 0.0;
          for (int64_t d = 0; d < hd; ++d) dot += double{qh[d]} * double{kp[d]};
          scores_[static_cast<size_t>(j)] = dot * double{spec_.scale};
          max_score = std::max(max_score, scores_[static_cast<size_t>(j)]);
        }
        double total = 0.0;
        for (double& s : scores_) total += (s = std::exp(s - max_score));
        std::fill(acc_.begin(), acc_.end(), 0.0);
        for (int64_t j = 0; j < n_attended; ++j) {
          const float* vp = values_.data() + attended(j) * kv_row + kv_head * hd;
          const double w = scores_[static_cast<size_t>(j)] / total;
          for (int64_t d = 0; d < hd; ++d) acc_[static_cast<size_t>(d)] += w * double{vp[d]};
        }
        float* oh = out.as<float>() + i * q_row + h * hd;
        for (int64_t d = 0; d < hd; ++d) oh[d] = static_cast<float>(acc_[static_cast<size_t>(d)]);
      }
    }
  }
}

}  // namespace duet_example
