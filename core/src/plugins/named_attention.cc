#include "plugins/named_attention.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "duet/error.h"
#include "plugins/named_call.h"

namespace duet {

Support NamedAttention::check(const KVCacheSpec& kv) const {
  return call_named(label_, [&] { return inner_->check(kv); });
}

void NamedAttention::forward(int32_t layer, const StepBatch& step, const TensorView& q,
                             const TensorView& k, const TensorView& v, KVCache& kv,
                             TensorView out) {
  call_named(label_, [&] { inner_->forward(layer, step, q, k, v, kv, out); });
  if (checked_) check_rows_stored(layer, step, k, v, kv);
}

void NamedAttention::check_rows_stored(int32_t layer, const StepBatch& step, const TensorView& k,
                                       const TensorView& v, KVCache& kv) {
  int64_t n_slots = 0;
  for (const int32_t slot : step.slot_mapping) n_slots = std::max<int64_t>(n_slots, slot + 1);
  kv.export_slots(n_slots, stored_);
  kv.write(layer, step, k, v);
  kv.export_slots(n_slots, expected_);
  if (stored_ == expected_) return;
  // Rows [layer][k|v][slot] of equal size (duet/kv_cache.h).
  const size_t row =
      stored_.size() / (2 * static_cast<size_t>(kv.spec().n_layers) * static_cast<size_t>(n_slots));
  for (size_t i = 0; i < static_cast<size_t>(step.n_tokens); ++i) {
    const auto slot = static_cast<size_t>(step.slot_mapping[i]);
    for (const size_t part : {size_t{0}, size_t{1}}) {
      const size_t at =
          ((static_cast<size_t>(layer) * 2 + part) * static_cast<size_t>(n_slots) + slot) * row;
      if (std::memcmp(stored_.data() + at, expected_.data() + at, row) != 0) {
        throw Error(ErrorKind::kPlugin,
                    label_ + " left the " + (part == 0 ? "K" : "V") + " row of position " +
                        std::to_string(step.positions[i]) + " (slot " + std::to_string(slot) +
                        ", layer " + std::to_string(layer) +
                        ") other than KVCache::write stores it: an attention stores every row it "
                        "is given (duet/attention.h); found by debug.check_plugins");
      }
    }
  }
}

}  // namespace duet
