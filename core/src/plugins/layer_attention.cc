#include "plugins/layer_attention.h"

#include <algorithm>
#include <string>

#include "duet/error.h"

namespace duet {

LayerAttention::LayerAttention(std::vector<std::shared_ptr<Attention>> by_window,
                               std::vector<int32_t> window_of_layer,
                               const std::vector<int32_t>& windows, WindowCache window_cache)
    : by_window_(std::move(by_window)),
      window_of_layer_(std::move(window_of_layer)),
      window_cache_(std::move(window_cache)) {
  for (const int32_t w : windows) windowed_.push_back(w > 0 ? 1 : 0);
  int32_t counted[2] = {0, 0};  // layers without and with a window so far
  for (const int32_t i : window_of_layer_) {
    const bool ring = window_cache_.spec.n_layers > 0 && windowed_[static_cast<size_t>(i)];
    cache_layer_.push_back(window_cache_.spec.n_layers > 0
                               ? counted[ring ? 1 : 0]++
                               : static_cast<int32_t>(cache_layer_.size()));
  }
}

Support LayerAttention::check(const KVCacheSpec& kv) const {
  Support all;
  for (size_t i = 0; i < by_window_.size(); ++i) {
    const bool ring = window_cache_.spec.n_layers > 0 && windowed_[i];
    Support own = by_window_[i]->check(ring ? window_cache_.spec : kv);
    for (std::string& reason : own.reasons) {
      if (std::find(all.reasons.begin(), all.reasons.end(), reason) == all.reasons.end())
        all.reasons.push_back(std::move(reason));
    }
  }
  return all;
}

void LayerAttention::begin_step(const StepBatch& step) {
  if (window_cache_.spec.n_layers == 0) return;
  if (window_cache_.rings == nullptr || window_cache_.cache == nullptr)
    throw Error(ErrorKind::kInternal, "LayerAttention: a step before the window cache was made");
  window_cache_.rings->map_step(step, mapped_);
  mapped_from_ = &step;
}

void LayerAttention::forward(int32_t layer, const StepBatch& step, const TensorView& q,
                             const TensorView& k, const TensorView& v, KVCache& kv,
                             TensorView out) {
  const auto at = static_cast<size_t>(layer);
  const auto i = static_cast<size_t>(window_of_layer_[at]);
  if (window_cache_.spec.n_layers == 0 || !windowed_[i]) {
    by_window_[i]->forward(cache_layer_[at], step, q, k, v, kv, out);
    return;
  }
  if (mapped_from_ != &step) {
    throw Error(ErrorKind::kInternal, "LayerAttention: layer " + std::to_string(layer) +
                                          " runs a step begin_step() did not map");
  }
  by_window_[i]->forward(cache_layer_[at], mapped_, q, k, v, *window_cache_.cache, out);
}

void begin_attention_step(Attention& attention, const StepBatch& step) {
  if (auto* layered = dynamic_cast<LayerAttention*>(&attention)) layered->begin_step(step);
}

}  // namespace duet
