#include "onednn_kv_cache.h"

#include <cstring>
#include <tuple>

namespace duet::onednn {

Support OnednnKVCache::check(const KVCacheSpec& spec) {
  return check_contiguous_kv_cache(spec, "onednn", {DType::kF32, DType::kF16, DType::kQ8_0});
}

int32_t OnednnKVCache::tile_slots(const KVCacheSpec& spec, CpuPath path, KVTileRules rules) {
  if (rules.rows) return 0;
  if (rules.batch_invariant && spec.block_tokens % kTileSlots != 0) return 0;
  if (spec.dtype == DType::kQ8_0) return path == CpuPath::kAvx512Vnni ? kTileSlots : 0;
  if (spec.dtype == DType::kF16 && rules.f16) {
    return path == CpuPath::kAvx512 || path == CpuPath::kAvx512Vnni ? kTileSlots : 0;
  }
  return 0;
}

OnednnKVCache::OnednnKVCache(const KVCacheSpec& spec, HostDevice& device, CpuPath path,
                             KVTileRules rules)
    : RowKVCache(spec, device,
                 tile_slots(spec, path, rules) != 0
                     ? (spec.capacity_tokens + kTileSlots - 1) / kTileSlots * kTileSlots
                     : spec.capacity_tokens),
      tiled_(tile_slots(spec, path, rules) != 0),
      kernels_(vector_kernels(path)) {}

KVLayerView OnednnKVCache::layer(int32_t layer) {
  KVLayerView view = RowKVCache::layer(layer);
  view.tile_slots = tiled_ ? kTileSlots : 0;
  return view;
}

void OnednnKVCache::read_slot(const uint8_t* base, TilePart part, int64_t slot,
                              uint8_t* row) const {
  const uint64_t bytes = slot_bytes();
  if (!tiled_) {
    std::memcpy(row, base + static_cast<uint64_t>(slot) * bytes, bytes);
    return;
  }
  get_tile_row(spec().dtype, part, base + tile_offset(slot, static_cast<int64_t>(bytes)),
               tile_lane(slot), spec().n_kv_heads, spec().head_dim, row);
}

void OnednnKVCache::write_slot(uint8_t* base, TilePart part, int64_t slot,
                               const uint8_t* row) const {
  const uint64_t bytes = slot_bytes();
  if (!tiled_) {
    std::memcpy(base + static_cast<uint64_t>(slot) * bytes, row, bytes);
    return;
  }
  put_tile_row(spec().dtype, part, row, spec().n_kv_heads, spec().head_dim,
               base + tile_offset(slot, static_cast<int64_t>(bytes)), tile_lane(slot));
}

void OnednnKVCache::write(int32_t layer, const StepBatch& step, const TensorView& k,
                          const TensorView& v) {
  const int64_t kv_row = int64_t{spec().n_kv_heads} * spec().head_dim;
  const auto bytes = static_cast<int64_t>(slot_bytes());
  const DType dtype = spec().dtype;
  const KVLayerView view = this->layer(layer);
  if (tiled_) row_.resize(static_cast<size_t>(bytes));
  for (int32_t i = 0; i < step.n_tokens; ++i) {
    const int64_t slot = step.slot_mapping[static_cast<size_t>(i)];
    for (const auto& [part, src, base] :
         {std::tuple{TilePart::kKeys, k.as<const float>(), view.k},
          std::tuple{TilePart::kValues, v.as<const float>(), view.v}}) {
      const float* row = src + i * kv_row;
      auto* storage = static_cast<uint8_t*>(base);
      if (tiled_) {
        if (dtype == DType::kF16) {
          kernels_.narrow_f16(row, reinterpret_cast<uint16_t*>(row_.data()), kv_row);
        } else {
          kernels_.quantize_q8_0(row, row_.data(), kv_row);
        }
        write_slot(storage, part, slot, row_.data());
        continue;
      }
      void* dst = storage + slot * bytes;
      if (dtype == DType::kF16) {
        kernels_.narrow_f16(row, static_cast<uint16_t*>(dst), kv_row);
      } else if (dtype == DType::kQ8_0) {
        kernels_.quantize_q8_0(row, dst, kv_row);
      } else {
        std::memcpy(dst, row, static_cast<size_t>(kv_row) * sizeof(float));
      }
    }
  }
}

void OnednnKVCache::copy_blocks(int64_t src_block, int64_t dst_block, int64_t n) {
  // Blocks of whole tiles are the same bytes in either layout.
  if (!tiled_ || spec().block_tokens % kTileSlots == 0) {
    RowKVCache::copy_blocks(src_block, dst_block, n);
    return;
  }
  check_kv_block_copy(spec(), src_block, dst_block, n);
  // Blocks that cut tiles: slot by slot.
  std::vector<uint8_t> row(slot_bytes());
  const int64_t slots = n * spec().block_tokens;
  for (int32_t l = 0; l < spec().n_layers; ++l) {
    const KVLayerView view = layer(l);
    for (TilePart part : {TilePart::kKeys, TilePart::kValues}) {
      auto* base = static_cast<uint8_t*>(part == TilePart::kKeys ? view.k : view.v);
      for (int64_t s = 0; s < slots; ++s) {
        read_slot(base, part, src_block * spec().block_tokens + s, row.data());
        write_slot(base, part, dst_block * spec().block_tokens + s, row.data());
      }
    }
  }
}

void OnednnKVCache::export_slots(int64_t n_slots, std::vector<uint8_t>& host_out) {
  export_slot_range(0, n_slots, host_out);
}

void OnednnKVCache::import_slots(int64_t n_slots, const std::vector<uint8_t>& host_in) {
  import_slot_range(0, n_slots, host_in);
}

void OnednnKVCache::export_slot_range(int64_t first_slot, int64_t n_slots,
                                      std::vector<uint8_t>& host_out) {
  if (!tiled_) {
    RowKVCache::export_slot_range(first_slot, n_slots, host_out);
    return;
  }
  check_kv_range_export(spec(), first_slot, n_slots);
  host_out.resize(2 * slot_bytes() * static_cast<uint64_t>(n_slots) *
                  static_cast<uint64_t>(spec().n_layers));
  uint8_t* out = host_out.data();
  for (int32_t l = 0; l < spec().n_layers; ++l) {
    const KVLayerView view = layer(l);
    for (TilePart part : {TilePart::kKeys, TilePart::kValues}) {
      const auto* base = static_cast<const uint8_t*>(part == TilePart::kKeys ? view.k : view.v);
      for (int64_t s = first_slot; s < first_slot + n_slots; ++s, out += slot_bytes())
        read_slot(base, part, s, out);
    }
  }
}

void OnednnKVCache::import_slot_range(int64_t first_slot, int64_t n_slots,
                                      const std::vector<uint8_t>& host_in) {
  if (!tiled_) {
    RowKVCache::import_slot_range(first_slot, n_slots, host_in);
    return;
  }
  check_kv_range_import(spec(), first_slot, n_slots, host_in.size());
  const uint8_t* in = host_in.data();
  for (int32_t l = 0; l < spec().n_layers; ++l) {
    const KVLayerView view = layer(l);
    for (TilePart part : {TilePart::kKeys, TilePart::kValues}) {
      auto* base = static_cast<uint8_t*>(part == TilePart::kKeys ? view.k : view.v);
      for (int64_t s = first_slot; s < first_slot + n_slots; ++s, in += slot_bytes())
        write_slot(base, part, s, in);
    }
  }
}

}  // namespace duet::onednn
