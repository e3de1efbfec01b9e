#include "duet/row_kv_cache.h"

#include "duet/error.h"
#include "duet/quant.h"

namespace duet {

uint64_t RowKVCache::slot_bytes(const KVCacheSpec& spec) {
  return *dtype_row_bytes(
      spec.dtype, static_cast<uint64_t>(spec.n_kv_heads) * static_cast<uint64_t>(spec.head_dim));
}

uint64_t RowKVCache::storage_bytes(const KVCacheSpec& spec) {
  return 2 * static_cast<uint64_t>(spec.n_layers) * static_cast<uint64_t>(spec.capacity_tokens) *
         slot_bytes(spec);
}

RowKVCache::RowKVCache(const KVCacheSpec& spec, Device& device, std::unique_ptr<Buffer> storage)
    : spec_(spec),
      device_(device),
      slot_bytes_(slot_bytes(spec)),
      layer_bytes_(slot_bytes_ * static_cast<uint64_t>(spec.capacity_tokens)),
      storage_(std::move(storage)) {
  if (!storage_ || storage_->size() < storage_bytes(spec)) {
    throw Error(ErrorKind::kInternal,
                "a KV cache of " + std::to_string(storage_bytes(spec)) + " bytes was given " +
                    std::to_string(storage_ ? storage_->size() : 0) + " bytes of storage");
  }
}

RowKVCache::RowKVCache(const KVCacheSpec& spec, Device& device, int64_t layer_slots)
    : spec_(spec),
      device_(device),
      slot_bytes_(slot_bytes(spec)),
      layer_bytes_(slot_bytes_ *
                   static_cast<uint64_t>(layer_slots > 0 ? layer_slots : spec.capacity_tokens)),
      storage_(device.allocate(2 * layer_bytes_ * static_cast<uint64_t>(spec.n_layers))) {}

KVLayerView RowKVCache::layer(int32_t layer) {
  auto* base =
      static_cast<uint8_t*>(storage_->data()) + 2 * layer_bytes_ * static_cast<uint64_t>(layer);
  return KVLayerView{base, base + layer_bytes_, slot_bytes_, 0};
}

void RowKVCache::write(int32_t layer, const StepBatch& step, const TensorView& k,
                       const TensorView& v) {
  if (!device_.host_accessible()) {
    throw Error(ErrorKind::kInternal,
                "a KV cache on device " + device_.name() + " must override RowKVCache::write");
  }
  const int64_t row = int64_t{spec_.n_kv_heads} * spec_.head_dim;
  const KVLayerView view = this->layer(layer);
  for (int32_t i = 0; i < step.n_tokens; ++i) {
    const auto offset =
        static_cast<uint64_t>(step.slot_mapping[static_cast<size_t>(i)]) * slot_bytes_;
    quantize_row(spec_.dtype, k.as<const float>() + i * row, static_cast<uint8_t*>(view.k) + offset,
                 row);
    quantize_row(spec_.dtype, v.as<const float>() + i * row, static_cast<uint8_t*>(view.v) + offset,
                 row);
  }
}

void RowKVCache::copy_blocks(int64_t src_block, int64_t dst_block, int64_t n) {
  check_kv_block_copy(spec_, src_block, dst_block, n);
  const uint64_t block_bytes = slot_bytes_ * static_cast<uint64_t>(spec_.block_tokens);
  for (int32_t l = 0; l < spec_.n_layers; ++l) {
    const KVLayerView view = layer(l);
    for (void* base : {view.k, view.v}) {
      auto* p = static_cast<uint8_t*>(base);
      device_.copy_on_device(p + static_cast<uint64_t>(dst_block) * block_bytes,
                             p + static_cast<uint64_t>(src_block) * block_bytes,
                             static_cast<uint64_t>(n) * block_bytes);
    }
  }
}

// Qualified calls: a plugin's class derived from this one and built against
// ABI 1.3 has no slot-range entries in its vtable.
void RowKVCache::export_slots(int64_t n_slots, std::vector<uint8_t>& host_out) {
  RowKVCache::export_slot_range(0, n_slots, host_out);
}

void RowKVCache::import_slots(int64_t n_slots, const std::vector<uint8_t>& host_in) {
  RowKVCache::import_slot_range(0, n_slots, host_in);
}

void RowKVCache::export_slot_range(int64_t first_slot, int64_t n_slots,
                                   std::vector<uint8_t>& host_out) {
  check_kv_range_export(spec_, first_slot, n_slots);
  const uint64_t part = slot_bytes_ * static_cast<uint64_t>(n_slots);
  const uint64_t skip = slot_bytes_ * static_cast<uint64_t>(first_slot);
  host_out.resize(2 * part * static_cast<uint64_t>(spec_.n_layers));
  uint8_t* out = host_out.data();
  for (int32_t l = 0; l < spec_.n_layers; ++l, out += 2 * part) {
    const KVLayerView view = layer(l);
    device_.copy_to_host(out, static_cast<const uint8_t*>(view.k) + skip, part);
    device_.copy_to_host(out + part, static_cast<const uint8_t*>(view.v) + skip, part);
  }
  device_.synchronize();
}

void RowKVCache::import_slot_range(int64_t first_slot, int64_t n_slots,
                                   const std::vector<uint8_t>& host_in) {
  check_kv_range_import(spec_, first_slot, n_slots, host_in.size());
  const uint64_t part = slot_bytes_ * static_cast<uint64_t>(n_slots);
  const uint64_t skip = slot_bytes_ * static_cast<uint64_t>(first_slot);
  const uint8_t* in = host_in.data();
  for (int32_t l = 0; l < spec_.n_layers; ++l, in += 2 * part) {
    const KVLayerView view = layer(l);
    device_.copy_from_host(static_cast<uint8_t*>(view.k) + skip, in, part);
    device_.copy_from_host(static_cast<uint8_t*>(view.v) + skip, in + part, part);
  }
  // host_in may be freed when this returns, and callers expect the cache's
  // contents to be final.
  device_.synchronize();
}

}  // namespace duet
