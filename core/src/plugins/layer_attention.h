// layer_attention.h — one Attention for a model whose layers attend over
// different windows (Gemma 3: five sliding-window layers to one global),
// made of one attention per window (internal to core).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "duet/attention.h"
#include "duet/kv_cache.h"
#include "duet/step_batch.h"
#include "kv/window_rings.h"

namespace duet {

// The sliding-window layers' own cache (components.kv_cache.window_layers:
// ring): `spec` with n_layers 0 for none. `cache` and `rings` are null while
// a pipeline is only checked.
struct WindowCache {
  KVCacheSpec spec;
  KVCache* cache = nullptr;
  const WindowRings* rings = nullptr;
};

// forward(layer, ...) goes to by_window[window_of_layer[layer]]. Without a
// window cache, with the model's layer index and the cache it is given.
// With one, each layer's index is counted among the layers of its own
// cache: a layer with a window gets window_cache.cache and the step
// begin_step() mapped to its rings, the others the cache forward() is given
// (which then holds only them). check(kv) is every attention's, the
// windowed ones against window_cache.spec when there is a window cache,
// each reason once. REQUIRES: every index in window_of_layer names an
// attention of by_window, and windows[i] is by_window[i]'s window.
class LayerAttention final : public Attention {
 public:
  LayerAttention(std::vector<std::shared_ptr<Attention>> by_window,
                 std::vector<int32_t> window_of_layer, const std::vector<int32_t>& windows,
                 WindowCache window_cache);
  Support check(const KVCacheSpec& kv) const override;
  // Maps `step` to the rings for this forward pass's window layers; a
  // forward() of a window layer with another step throws
  // duet::Error(kInternal). Nothing to do without a window cache.
  void begin_step(const StepBatch& step);
  void forward(int32_t layer, const StepBatch& step, const TensorView& q, const TensorView& k,
               const TensorView& v, KVCache& kv, TensorView out) override;

 private:
  std::vector<std::shared_ptr<Attention>> by_window_;
  std::vector<int32_t> window_of_layer_;
  std::vector<char> windowed_;        // by_window_[i] has a window
  std::vector<int32_t> cache_layer_;  // each layer's index in its cache
  WindowCache window_cache_;
  const StepBatch* mapped_from_ = nullptr;
  StepBatch mapped_;
};

// LayerAttention::begin_step() when `attention` is one; nothing otherwise.
// Core calls it at the start of each forward pass.
void begin_attention_step(Attention& attention, const StepBatch& step);

}  // namespace duet
