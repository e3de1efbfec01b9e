#include "kernels/kv_tiles.h"

#include <cstddef>
#include <cstring>

#include "duet/block_formats.h"

namespace duet::onednn {
namespace {

constexpr int32_t kQ8Block = duet::blocks::kQK;  // elements per q8_0 block
constexpr int64_t kQ8BlockBytes = sizeof(duet::blocks::BlockQ8_0);
constexpr int64_t kQ8Quants = offsetof(duet::blocks::BlockQ8_0, qs);

// Byte offset of element d of slot j within one head's part of a tile.
int64_t element_at(TilePart part, int32_t head_dim, int32_t j, int32_t d) {
  if (part == TilePart::kKeys) return 64 * (d / 4) + 4 * j + d % 4;
  return 2 * (int64_t{head_dim} * (j / 2) + d) + j % 2;
}

// Byte offset of the scale of block b of slot j within one head's part.
int64_t scale_at(int32_t head_dim, int32_t j, int32_t b) {
  return 16 * int64_t{head_dim} + 2 * (16 * b + j);
}

// Byte offset of element d of slot j within one head's part of an f16 tile.
int64_t half_at(TilePart part, int32_t head_dim, int32_t j, int32_t d) {
  return part == TilePart::kKeys ? 2 * (16 * int64_t{d} + j) : 2 * (int64_t{head_dim} * j + d);
}

// Calls fn(tile_byte, row_byte, bytes) for every span of slot `lane`'s f16
// row that lies in one piece in the tile: a head's values, a key element.
template <class Fn>
void for_each_half(TilePart part, int32_t kv_heads, int32_t head_dim, int32_t lane, const Fn& fn) {
  for (int32_t g = 0; g < kv_heads; ++g) {
    const int64_t head = g * tile_head_bytes(DType::kF16, head_dim);
    const int64_t from = 2 * int64_t{g} * head_dim;
    if (part == TilePart::kValues) {
      fn(head + half_at(part, head_dim, lane, 0), from, 2 * static_cast<size_t>(head_dim));
      continue;
    }
    for (int32_t d = 0; d < head_dim; ++d)
      fn(head + half_at(part, head_dim, lane, d), from + 2 * d, 2);
  }
}

// Calls fn(tile_byte, row_byte) for every byte of slot `lane`'s q8_0 row.
template <class Fn>
void for_each_byte(TilePart part, int32_t kv_heads, int32_t head_dim, int32_t lane, const Fn& fn) {
  const int32_t blocks = head_dim / kQ8Block;
  for (int32_t g = 0; g < kv_heads; ++g) {
    const int64_t head = g * tile_head_bytes(DType::kQ8_0, head_dim);
    for (int32_t b = 0; b < blocks; ++b) {
      const int64_t block = (int64_t{g} * blocks + b) * kQ8BlockBytes;
      fn(head + scale_at(head_dim, lane, b), block);
      fn(head + scale_at(head_dim, lane, b) + 1, block + 1);
      for (int32_t e = 0; e < kQ8Block; ++e) {
        fn(head + element_at(part, head_dim, lane, b * kQ8Block + e), block + kQ8Quants + e);
      }
    }
  }
}

}  // namespace

void put_tile_row(DType type, TilePart part, const uint8_t* row, int32_t kv_heads, int32_t head_dim,
                  uint8_t* tile, int32_t lane) {
  if (type == DType::kF16) {
    for_each_half(part, kv_heads, head_dim, lane, [&](int64_t at, int64_t from, size_t bytes) {
      std::memcpy(tile + at, row + from, bytes);
    });
    return;
  }
  for_each_byte(part, kv_heads, head_dim, lane,
                [&](int64_t at, int64_t from) { tile[at] = row[from]; });
}

void get_tile_row(DType type, TilePart part, const uint8_t* tile, int32_t lane, int32_t kv_heads,
                  int32_t head_dim, uint8_t* row) {
  if (type == DType::kF16) {
    for_each_half(part, kv_heads, head_dim, lane, [&](int64_t at, int64_t from, size_t bytes) {
      std::memcpy(row + from, tile + at, bytes);
    });
    return;
  }
  for_each_byte(part, kv_heads, head_dim, lane,
                [&](int64_t at, int64_t from) { row[from] = tile[at]; });
}

}  // namespace duet::onednn
