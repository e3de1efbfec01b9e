#include "onednn_kv_cache.h"

#include <cstring>

namespace duet::onednn {

Support OnednnKVCache::check(const KVCacheSpec& spec) {
  return check_contiguous_kv_cache(spec, "onednn", {DType::kF32, DType::kF16, DType::kQ8_0});
}

bool OnednnKVCache::tiled(CpuPath path, DType dtype) {
  return dtype == DType::kQ8_0 && path == CpuPath::kAvx512Vnni;
}

OnednnKVCache::OnednnKVCache(const KVCacheSpec& spec, OnednnDevice& device, CpuPath path)
    : spec_(spec),
      tiled_(tiled(path, spec.dtype)),
      layer_bytes_(slot_bytes() *
                   static_cast<uint64_t>(tiled_ ? (spec.capacity_tokens + kTileSlots - 1) /
                                                      kTileSlots * kTileSlots
                                                : spec.capacity_tokens)),
      storage_(device.allocate(memory_bytes())) {}

uint64_t OnednnKVCache::slot_bytes() const {
  return *dtype_row_bytes(
      spec_.dtype, static_cast<uint64_t>(spec_.n_kv_heads) * static_cast<uint64_t>(spec_.head_dim));
}

KVLayerView OnednnKVCache::layer(int32_t layer) {
  auto* base =
      static_cast<uint8_t*>(storage_->data()) + 2 * layer_bytes_ * static_cast<uint64_t>(layer);
  return KVLayerView{base, base + layer_bytes_, slot_bytes(), tiled_ ? kTileSlots : 0};
}

void OnednnKVCache::read_slot(const uint8_t* base, TilePart part, int64_t slot,
                              uint8_t* row) const {
  const uint64_t bytes = slot_bytes();
  if (!tiled_) {
    std::memcpy(row, base + static_cast<uint64_t>(slot) * bytes, bytes);
    return;
  }
  get_tile_row(part, base + tile_offset(slot, static_cast<int64_t>(bytes)), tile_lane(slot),
               spec_.n_kv_heads, spec_.head_dim, row);
}

void OnednnKVCache::write_slot(uint8_t* base, TilePart part, int64_t slot,
                               const uint8_t* row) const {
  const uint64_t bytes = slot_bytes();
  if (!tiled_) {
    std::memcpy(base + static_cast<uint64_t>(slot) * bytes, row, bytes);
    return;
  }
  put_tile_row(part, row, spec_.n_kv_heads, spec_.head_dim,
               base + tile_offset(slot, static_cast<int64_t>(bytes)), tile_lane(slot));
}

void OnednnKVCache::copy_blocks(int64_t src_block, int64_t dst_block, int64_t n) {
  check_kv_block_copy(spec_, src_block, dst_block, n);
  // Blocks of whole tiles are the same bytes in either layout.
  if (!tiled_ || spec_.block_tokens % kTileSlots == 0) {
    const uint64_t bytes = slot_bytes() * static_cast<uint64_t>(spec_.block_tokens);
    for (int32_t l = 0; l < spec_.n_layers; ++l) {
      KVLayerView view = layer(l);
      for (void* base : {view.k, view.v}) {
        auto* p = static_cast<uint8_t*>(base);
        std::memcpy(p + static_cast<uint64_t>(dst_block) * bytes,
                    p + static_cast<uint64_t>(src_block) * bytes, static_cast<uint64_t>(n) * bytes);
      }
    }
    return;
  }
  // Blocks that cut tiles: slot by slot.
  std::vector<uint8_t> row(slot_bytes());
  const int64_t slots = n * spec_.block_tokens;
  for (int32_t l = 0; l < spec_.n_layers; ++l) {
    KVLayerView view = layer(l);
    for (TilePart part : {TilePart::kKeys, TilePart::kValues}) {
      auto* base = static_cast<uint8_t*>(part == TilePart::kKeys ? view.k : view.v);
      for (int64_t s = 0; s < slots; ++s) {
        read_slot(base, part, src_block * spec_.block_tokens + s, row.data());
        write_slot(base, part, dst_block * spec_.block_tokens + s, row.data());
      }
    }
  }
}

void OnednnKVCache::export_slots(int64_t n_slots, std::vector<uint8_t>& host_out) {
  check_kv_export(spec_, n_slots);
  host_out.resize(2 * slot_bytes() * static_cast<uint64_t>(n_slots) *
                  static_cast<uint64_t>(spec_.n_layers));
  uint8_t* out = host_out.data();
  for (int32_t l = 0; l < spec_.n_layers; ++l) {
    KVLayerView view = layer(l);
    for (TilePart part : {TilePart::kKeys, TilePart::kValues}) {
      const auto* base = static_cast<const uint8_t*>(part == TilePart::kKeys ? view.k : view.v);
      for (int64_t s = 0; s < n_slots; ++s, out += slot_bytes()) read_slot(base, part, s, out);
    }
  }
}

void OnednnKVCache::import_slots(int64_t n_slots, const std::vector<uint8_t>& host_in) {
  check_kv_import(spec_, n_slots, host_in.size());
  const uint8_t* in = host_in.data();
  for (int32_t l = 0; l < spec_.n_layers; ++l) {
    KVLayerView view = layer(l);
    for (TilePart part : {TilePart::kKeys, TilePart::kValues}) {
      auto* base = static_cast<uint8_t*>(part == TilePart::kKeys ? view.k : view.v);
      for (int64_t s = 0; s < n_slots; ++s, in += slot_bytes()) write_slot(base, part, s, in);
    }
  }
}

}  // namespace duet::onednn
