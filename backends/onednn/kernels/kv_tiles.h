// kernels/kv_tiles.h — the onednn backend's KV-cache layouts in tiles of 16
// slots, stored the way its decode attention reads them: q8_0 for
// vpdpbusd and vpdpwssd (VNNI CPUs), f16 for vfmadd231ps (AVX-512 CPUs,
// backend option f16_cache_tiles).
//
// A cache stored slot by slot (one row per slot) makes decode attention
// shuffle or reduce: the scores of 16 positions want each lane to hold one
// position, and (q8_0) the values want the elements of neighbouring
// positions side by side. Here the elements are put in those places once,
// when a position is stored, and decode reads them as they lie. A tile
// holds 16 consecutive slots; within it each KV head has
// tile_head_bytes(type, head_dim) bytes, the same as 16 rows of that head
// (so a tiled cache is no larger), in this order:
//
// q8_0 (17 * head_dim bytes):
//   keys:   byte 64 * c + 4 * j + r  is element 4c + r of slot j (int8)
//   values: byte 2 * (head_dim * (j / 2) + d) + j % 2  is element d of slot j (int8)
//   then, for both:  the f16 scale of block b of slot j at byte
//           16 * head_dim + 2 * (16 * b + j)
// f16 (32 * head_dim bytes):
//   keys:   bytes 2 * (16 * d + j) .. +1  are element d of slot j
//   values: bytes 2 * (head_dim * j + d) .. +1  are element d of slot j
//
// for slot j in [0, 16), element d in [0, head_dim), and c in
// [0, head_dim / 4). KV heads follow each other within a tile
// (tile_bytes = kv_heads * tile_head_bytes). The elements (and q8_0's
// scales) are exactly those of duet::quantize_row's row of the slot, only
// moved: a row put into a tile and got back is the same bytes. Zeroed
// storage reads as rows of zeros.
//
// Portable code (no instruction-set requirements); REQUIRES throughout:
// type q8_0 or f16, head_dim a positive multiple of 32, lane in [0, 16).
#pragma once

#include <cstdint>

#include "duet/dtype.h"

namespace duet::onednn {

constexpr int32_t kTileSlots = 16;

// Bytes of one KV head's 16 slots in a tile of `type` (q8_0 or f16).
constexpr int64_t tile_head_bytes(DType type, int32_t head_dim) {
  return int64_t{head_dim} * (type == DType::kF16 ? 32 : 17);
}

// Where slot `slot` lies in K (or V) storage in tiles whose rows are
// slot_bytes long: the byte offset of its tile, and its lane there.
constexpr int64_t tile_offset(int64_t slot, int64_t slot_bytes) {
  return slot / kTileSlots * kTileSlots * slot_bytes;
}
constexpr int32_t tile_lane(int64_t slot) { return static_cast<int32_t>(slot % kTileSlots); }

enum class TilePart { kKeys, kValues };

// Stores `row`, the `type` row of one slot (kv_heads heads of head_dim
// elements, as duet::quantize_row writes it), as slot `lane` of `tile`.
void put_tile_row(DType type, TilePart part, const uint8_t* row, int32_t kv_heads, int32_t head_dim,
                  uint8_t* tile, int32_t lane);

// The `type` row of slot `lane` of `tile`: the bytes put_tile_row stored.
void get_tile_row(DType type, TilePart part, const uint8_t* tile, int32_t lane, int32_t kv_heads,
                  int32_t head_dim, uint8_t* row);

}  // namespace duet::onednn
