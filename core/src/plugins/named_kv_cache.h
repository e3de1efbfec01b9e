// named_kv_cache.h — a plugin's KV-cache storage as the pipeline holds it:
// the same calls, and whatever the plugin throws comes back naming it
// (internal to core).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "duet/kv_cache.h"

namespace duet {

// Forwards every call to `inner` through call_named() with `label`
// ("KV-cache storage 'x' (plugin 'y', components.kv_cache.impl)"): a
// duet::Error keeps its kind, another exception becomes duet::Error(kPlugin),
// std::bad_alloc passes as it is. `abi_minor` is the ABI the plugin was built
// against: the slot-range export and import go to KVCache's base versions
// for a plugin older than 1.4, so this wrapper is safe to call as a 1.4
// cache.
class NamedKVCache final : public KVCache {
 public:
  NamedKVCache(std::shared_ptr<KVCache> inner, std::string label, uint32_t abi_minor)
      : inner_(std::move(inner)), label_(std::move(label)), abi_minor_(abi_minor) {}

  const KVCacheSpec& spec() const override { return inner_->spec(); }
  uint64_t memory_bytes() const override;
  KVLayerView layer(int32_t layer) override;
  void copy_blocks(int64_t src_block, int64_t dst_block, int64_t n) override;
  void export_slots(int64_t n_slots, std::vector<uint8_t>& host_out) override;
  void import_slots(int64_t n_slots, const std::vector<uint8_t>& host_in) override;
  void write(int32_t layer, const StepBatch& step, const TensorView& k,
             const TensorView& v) override;
  void export_slot_range(int64_t first_slot, int64_t n_slots,
                         std::vector<uint8_t>& host_out) override;
  void import_slot_range(int64_t first_slot, int64_t n_slots,
                         const std::vector<uint8_t>& host_in) override;

 private:
  std::shared_ptr<KVCache> inner_;
  std::string label_;
  uint32_t abi_minor_;
};

}  // namespace duet
