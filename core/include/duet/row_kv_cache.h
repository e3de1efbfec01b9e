// duet/row_kv_cache.h — the KV-cache storage every built-in backend shares:
// K and V as slot rows in one allocation on the backend's device.
//
// Layout: [layer][k|v][slot][head][dim], layer_slots slots per layer, each
// slot one row of spec.dtype (duet/quant.h's rows; q8_0 blocks of 32 never
// span two heads). The storage does not care how core groups slots into
// blocks, so any block_tokens that divides the capacity is accepted. Block
// copies, export and import move rows through the Device, so the class
// serves host and GPU backends alike; a backend (or a KV-cache plugin)
// derives from it and adds what differs: zeroing, a fused or tiled write, a
// file-backed allocation.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "duet/device.h"
#include "duet/export.h"
#include "duet/kv_cache.h"

namespace duet {

class DUET_API RowKVCache : public KVCache {
 public:
  // Bytes of one slot's row: n_kv_heads * head_dim elements of spec.dtype.
  // REQUIRES: the dtype can hold such a row (check_kv_rows()).
  static uint64_t slot_bytes(const KVCacheSpec& spec);
  // Bytes of a cache of `spec` with spec.capacity_tokens slots per layer.
  static uint64_t storage_bytes(const KVCacheSpec& spec);

  // Allocates 2 * n_layers * layer_slots slots on `device` (layer_slots 0
  // means spec.capacity_tokens; a backend rounding the capacity up to whole
  // tiles passes more). The memory is as Device::allocate returns it.
  // REQUIRES: check_kv_rows(spec, ...) is ok and layer_slots is 0 or at
  // least spec.capacity_tokens. Throws duet::Error(kOutOfMemory) when the
  // device lacks room. `device` must outlive the cache.
  RowKVCache(const KVCacheSpec& spec, Device& device, int64_t layer_slots = 0);

  // Keeps its rows in `storage` instead, memory the caller allocated (a
  // mapped file, say) that the backend's ops and attention can address as
  // they would memory of `device`, which still makes the copies. REQUIRES:
  // storage->size() >= storage_bytes(spec). Throws duet::Error(kInternal)
  // for a smaller buffer.
  RowKVCache(const KVCacheSpec& spec, Device& device, std::unique_ptr<Buffer> storage);

  const KVCacheSpec& spec() const override { return spec_; }
  uint64_t memory_bytes() const override { return storage_->size(); }
  KVLayerView layer(int32_t layer) override;

  // Converts each row with quantize_row() on the host. REQUIRES: the device
  // is host_accessible(); a device backend overrides write() (else
  // duet::Error(kInternal)).
  void write(int32_t layer, const StepBatch& step, const TensorView& k,
             const TensorView& v) override;

  // Through Device::copy_on_device, copy_to_host and copy_from_host; export
  // and import wait for the device.
  void copy_blocks(int64_t src_block, int64_t dst_block, int64_t n) override;
  void export_slots(int64_t n_slots, std::vector<uint8_t>& host_out) override;
  void import_slots(int64_t n_slots, const std::vector<uint8_t>& host_in) override;
  // The range alone (export_slots is the range from slot 0).
  void export_slot_range(int64_t first_slot, int64_t n_slots,
                         std::vector<uint8_t>& host_out) override;
  void import_slot_range(int64_t first_slot, int64_t n_slots,
                         const std::vector<uint8_t>& host_in) override;

 protected:
  uint64_t slot_bytes() const { return slot_bytes_; }
  Device& device() { return device_; }
  Buffer& storage() { return *storage_; }

 private:
  KVCacheSpec spec_;
  Device& device_;
  uint64_t slot_bytes_;
  uint64_t layer_bytes_;  // bytes of K (or V) of one layer
  std::unique_ptr<Buffer> storage_;
};

}  // namespace duet
