#include "plugins/layer_attention.h"

#include <algorithm>
#include <string>

namespace duet {

Support LayerAttention::check(const KVCacheSpec& kv) const {
  Support all;
  for (const auto& attention : by_window_) {
    Support own = attention->check(kv);
    for (std::string& reason : own.reasons) {
      if (std::find(all.reasons.begin(), all.reasons.end(), reason) == all.reasons.end())
        all.reasons.push_back(std::move(reason));
    }
  }
  return all;
}

void LayerAttention::forward(int32_t layer, const StepBatch& step, const TensorView& q,
                             const TensorView& k, const TensorView& v, KVCache& kv,
                             TensorView out) {
  by_window_[static_cast<size_t>(window_of_layer_[static_cast<size_t>(layer)])]->forward(
      layer, step, q, k, v, kv, out);
}

}  // namespace duet
