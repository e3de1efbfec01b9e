#include "plugins/named_kv_cache.h"

#include "kv/kv_handover.h"
#include "plugins/named_call.h"

namespace duet {

uint64_t NamedKVCache::memory_bytes() const {
  return call_named(label_, [&] { return inner_->memory_bytes(); });
}

KVLayerView NamedKVCache::layer(int32_t layer) {
  return call_named(label_, [&] { return inner_->layer(layer); });
}

void NamedKVCache::copy_blocks(int64_t src_block, int64_t dst_block, int64_t n) {
  call_named(label_, [&] { inner_->copy_blocks(src_block, dst_block, n); });
}

void NamedKVCache::export_slots(int64_t n_slots, std::vector<uint8_t>& host_out) {
  call_named(label_, [&] { inner_->export_slots(n_slots, host_out); });
}

void NamedKVCache::import_slots(int64_t n_slots, const std::vector<uint8_t>& host_in) {
  call_named(label_, [&] { inner_->import_slots(n_slots, host_in); });
}

void NamedKVCache::write(int32_t layer, const StepBatch& step, const TensorView& k,
                         const TensorView& v) {
  call_named(label_, [&] { inner_->write(layer, step, k, v); });
}

void NamedKVCache::export_slot_range(int64_t first_slot, int64_t n_slots,
                                     std::vector<uint8_t>& host_out) {
  call_named(label_, [&] {
    export_range(KVEndpoint{*inner_, abi_minor_}, SlotRange{first_slot, n_slots}, host_out);
  });
}

void NamedKVCache::import_slot_range(int64_t first_slot, int64_t n_slots,
                                     const std::vector<uint8_t>& host_in) {
  call_named(label_, [&] {
    import_range(KVEndpoint{*inner_, abi_minor_}, SlotRange{first_slot, n_slots}, host_in);
  });
}

}  // namespace duet
