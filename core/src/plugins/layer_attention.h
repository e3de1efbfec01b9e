// layer_attention.h — one Attention for a model whose layers attend over
// different windows (Gemma 3: five sliding-window layers to one global),
// made of one attention per window (internal to core).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "duet/attention.h"

namespace duet {

// forward(layer, ...) goes to by_window[window_of_layer[layer]]; check()
// is every attention's, each reason once. REQUIRES: every index in
// window_of_layer names an attention of by_window.
class LayerAttention final : public Attention {
 public:
  LayerAttention(std::vector<std::shared_ptr<Attention>> by_window,
                 std::vector<int32_t> window_of_layer)
      : by_window_(std::move(by_window)), window_of_layer_(std::move(window_of_layer)) {}
  Support check(const KVCacheSpec& kv) const override;
  void forward(int32_t layer, const StepBatch& step, const TensorView& q, const TensorView& k,
               const TensorView& v, KVCache& kv, TensorView out) override;

 private:
  std::vector<std::shared_ptr<Attention>> by_window_;
  std::vector<int32_t> window_of_layer_;
};

}  // namespace duet
