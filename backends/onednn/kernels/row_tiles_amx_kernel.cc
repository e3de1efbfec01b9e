// The row-tile product on AMX-INT8 (row_tiles_amx.h).
//
// Per weight tile: the tile's blocks as AMX weight tiles (kBytes and kHalves
// as stored; the nibble formats unpacked once into a scratch copy of the
// kHalves layout), then, for each group of 16 activation rows, the blocks
// in order: one tdpbsud per term (kHalves: per half and term) into int32
// tiles stored to the stack, then folded into 16 f32 accumulators, one per
// activation row, with the VNNI kernel's float operations. On the Xeon of
// 2026-12-05 a tdpbsud takes ~5.3 ns whatever its K (up to 64), a
// tilestored ~4.8 ns: each block's sums cost about as much to store as to
// compute, and its fold, ~100 vector instructions, as much again, so the
// next block's tile work is issued before this one's fold.
//
// Tile registers (numbers, as the intrinsics stringify them), for whole
// blocks (kHalves: half blocks, K = 16):
//   tmm0, tmm7  weights, K/4 x 64 bytes         tmm3, tmm4  sums of the terms (even blocks;
//   tmm1        first term, 16 x K bytes                    kHalves: first half)
//   tmm2        second term, 16 x K bytes       tmm5, tmm6  the same for odd blocks
//                                                           (kHalves: second half)

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>

#include "kernels/avx512_intrinsics.h"
#include "kernels/qgemv_paths.h"
#include "kernels/row_tiles_amx.h"
#include "kernels/row_tiles_blocks.h"

namespace duet::onednn::detail {
namespace {

constexpr int kRows = RowTiles::kRows;
constexpr int64_t kTileBytes = AmxActivations::kTileBytes;

struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Halves: kHalves tiles' configuration (half blocks), else whole blocks.
TileConfig tile_config(bool halves) {
  TileConfig c;
  auto set = [&c](int tile, int rows, int colsb) {
    c.rows[tile] = static_cast<uint8_t>(rows);
    c.colsb[tile] = static_cast<uint16_t>(colsb);
  };
  const int k = halves ? RowTiles::kBlock / 2 : RowTiles::kBlock;
  set(0, k / 4, 64);
  set(1, kRows, k);
  set(2, kRows, k);
  for (int c_tile = 3; c_tile <= 6; ++c_tile) set(c_tile, kRows, 64);
  set(7, k / 4, 64);
  return c;
}

// Where a tile's blocks keep their scales and weight bytes: block b at
// base + b * stride, each array of 16 f32 at its offset (d2 and m2: kHalves'
// second half).
struct BlockView {
  const uint8_t* base;
  int64_t stride;
  int64_t d, m, d2, m2, w;
  const float* at(int64_t b, int64_t offset) const {
    return reinterpret_cast<const float*>(base + b * stride + offset);
  }
  const uint8_t* bytes(int64_t b) const { return base + b * stride + w; }
};

// The kHalves layout (row_tiles.h): d, d2, m, m2, then the weight vectors.
constexpr int64_t kHalvesStride = 4 * 64 + kVectorsPerBlock * 64;
constexpr BlockView halves_view(const uint8_t* base) {
  return BlockView{base, kHalvesStride, 0, 128, 64, 192, 256};
}
static_assert(kHalvesStride == 768, "row_tiles.h: a kHalves block is 768 bytes");

// A scratch buffer per thread for one tile's unpacked blocks.
uint8_t* scratch(int64_t bytes) {
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  thread_local std::unique_ptr<uint8_t, Free> buffer;
  thread_local int64_t capacity = 0;
  if (bytes > capacity) {
    buffer.reset(static_cast<uint8_t*>(std::aligned_alloc(64, static_cast<size_t>(bytes))));
    if (!buffer) throw std::bad_alloc();
    capacity = bytes;
  }
  return buffer.get();
}

// Tile t's blocks where the AMX weight tiles can load them: kBytes and
// kHalves tiles as stored, the nibble formats unpacked into the thread's
// scratch buffer in the kHalves layout (d2 and m2 unused).
template <TileFormat F, Nibbles N>
BlockView tile_blocks(const RowTiles& tiles, int64_t t) {
  const uint8_t* tile = tiles.tile(t);
  if constexpr (F == TileFormat::kBytes) {
    return BlockView{tile, tiles.block_bytes(), 0, 64, 0, 64, 128};
  } else if constexpr (F == TileFormat::kHalves) {
    return halves_view(tile);
  } else {
    uint8_t* out = scratch(tiles.blocks() * kHalvesStride);
    const uint8_t* p = tile;
    for (int64_t b = 0; b < tiles.blocks(); ++b, p += tiles.block_bytes()) {
      Block blk;
      if constexpr (F == TileFormat::kSuperNibbles) {
        blk = load_super_nibbles(tile, b);
      } else {
        blk = load_block<F, N>(p);
      }
      uint8_t* o = out + b * kHalvesStride;
      _mm512_store_ps(o, blk.d);
      _mm512_store_ps(o + 128, blk.m);
      for (int j = 0; j < kVectorsPerBlock; ++j) _mm512_store_si512(o + 256 + 64 * j, blk.w[j]);
    }
    return halves_view(out);
  }
}

// acc[i] += the stored sums of activation row i (two terms: 256 * first +
// second) times d * dx[i], plus m * sums[i]: row_tiles_vnni.cc's operations.
// dx and sums are 2 floats apart per row.
template <int Terms>
[[gnu::always_inline]] inline void fold(const int32_t* c_hi, const int32_t* c_lo, __m512 d,
                                        __m512 m, const float* dx, const float* sums,
                                        __m512* acc) {
#pragma GCC unroll 16
  for (int i = 0; i < kRows; ++i) {
    __m512i s = _mm512_load_si512(c_hi + kRows * i);
    if constexpr (Terms == 2) {
      s = _mm512_add_epi32(_mm512_slli_epi32(s, 8), _mm512_load_si512(c_lo + kRows * i));
    }
    acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(d, _mm512_set1_ps(dx[2 * i])),
                             acc[i]);
    acc[i] = _mm512_fmadd_ps(m, _mm512_set1_ps(sums[2 * i]), acc[i]);
  }
}

// One block's int32 sums: [0] and [1] the first and second term (kHalves:
// of its first half; [2] and [3] those of its second).
using BlockSums = int32_t[4][kRows * kRows];

// Block b of `view` against activation group g, into `sums`. Tiles 3-6 hold
// the sums; blocks alternate between 3, 4 (Even) and 5, 6, so one block's
// stores need not wait for the next one's products (kHalves takes all four).
template <bool Halves, int Terms, bool Even>
[[gnu::always_inline]] inline void multiply(const BlockView& view, const AmxActivations& act,
                                            int64_t g, int64_t b, BlockSums& sums) {
  const int8_t* a = act.block(g, b);
  const uint8_t* w = view.bytes(b);
  if constexpr (!Halves) {
    _tile_loadd(0, w, 64);
    _tile_loadd(1, a, RowTiles::kBlock);
    if constexpr (Terms == 2) _tile_loadd(2, a + kTileBytes, RowTiles::kBlock);
    // Both products before either store, which waits for its product.
    if constexpr (Even) {
      _tile_zero(3);
      _tile_dpbsud(3, 1, 0);
      if constexpr (Terms == 2) {
        _tile_zero(4);
        _tile_dpbsud(4, 2, 0);
        _tile_stored(4, sums[1], 64);
      }
      _tile_stored(3, sums[0], 64);
    } else {
      _tile_zero(5);
      _tile_dpbsud(5, 1, 0);
      if constexpr (Terms == 2) {
        _tile_zero(6);
        _tile_dpbsud(6, 2, 0);
        _tile_stored(6, sums[1], 64);
      }
      _tile_stored(5, sums[0], 64);
    }
  } else {
    _tile_loadd(0, w, 64);
    _tile_loadd(7, w + 256, 64);
    _tile_loadd(1, a, RowTiles::kBlock);
    _tile_zero(3);
    _tile_dpbsud(3, 1, 0);
    _tile_loadd(1, a + 16, RowTiles::kBlock);
    _tile_zero(5);
    _tile_dpbsud(5, 1, 7);
    if constexpr (Terms == 2) {
      _tile_loadd(2, a + kTileBytes, RowTiles::kBlock);
      _tile_zero(4);
      _tile_dpbsud(4, 2, 0);
      _tile_loadd(2, a + kTileBytes + 16, RowTiles::kBlock);
      _tile_zero(6);
      _tile_dpbsud(6, 2, 7);
      _tile_stored(4, sums[1], 64);
      _tile_stored(6, sums[3], 64);
    }
    _tile_stored(3, sums[0], 64);
    _tile_stored(5, sums[2], 64);
  }
}

// Block b's sums of group g folded into acc.
template <bool Halves, int Terms>
[[gnu::always_inline]] inline void fold_block(const BlockView& view, const AmxActivations& act,
                                              int64_t g, int64_t b, const BlockSums& sums,
                                              __m512* acc) {
  const auto* dx = reinterpret_cast<const float*>(act.block(g, b) + Terms * kTileBytes);
  const __m512 d = _mm512_load_ps(view.at(b, view.d));
  const __m512 m = _mm512_load_ps(view.at(b, view.m));
  if constexpr (!Halves) {
    fold<Terms>(sums[0], sums[1], d, m, dx, dx + 1, acc);
  } else {
    const float* half_sums = dx + 2 * kRows;
    fold<Terms>(sums[0], sums[1], d, m, dx, half_sums, acc);
    fold<Terms>(sums[2], sums[3], _mm512_load_ps(view.at(b, view.d2)),
                _mm512_load_ps(view.at(b, view.m2)), dx, half_sums + 1, acc);
  }
}

// The weight rows [first, first + valid) of one tile, whose blocks `view`
// shows, against every activation group: block b + 1's products are issued
// before block b's sums are folded, so that the tile unit and the vector
// units work at once.
template <bool Halves, int Terms>
void tile_product(const BlockView& view, int64_t blocks, const AmxActivations& act, float* y,
                  int64_t ldy, int64_t first, int64_t valid) {
  alignas(64) BlockSums sums[2];
  const auto mask = static_cast<__mmask16>((uint32_t{1} << valid) - 1);
  for (int64_t g = 0; g < act.groups(); ++g) {
    __m512 acc[kRows];
    for (__m512& a : acc) a = _mm512_setzero_ps();
    multiply<Halves, Terms, true>(view, act, g, 0, sums[0]);
    for (int64_t b = 0; b < blocks; b += 2) {
      if (b + 1 < blocks) multiply<Halves, Terms, false>(view, act, g, b + 1, sums[1]);
      fold_block<Halves, Terms>(view, act, g, b, sums[0], acc);
      if (b + 1 >= blocks) break;
      if (b + 2 < blocks) multiply<Halves, Terms, true>(view, act, g, b + 2, sums[0]);
      fold_block<Halves, Terms>(view, act, g, b + 1, sums[1], acc);
    }
    const int64_t rows = act.rows() - g * kRows;
    float* out = y + g * kRows * ldy + first;
#pragma GCC unroll 16
    for (int i = 0; i < kRows; ++i) {  // constant indices: acc stays in registers
      if (i < rows) _mm512_mask_storeu_ps(out + i * ldy, mask, acc[i]);
    }
  }
}

template <TileFormat F, Nibbles N>
void tiles_product(const RowTiles& tiles, const AmxActivations& act, float* y, int64_t ldy,
                   int64_t tile_begin, int64_t tile_end) {
  constexpr bool kHalves = F == TileFormat::kHalves;
  for (int64_t t = tile_begin; t < tile_end; ++t) {
    const BlockView view = tile_blocks<F, N>(tiles, t);
    const int64_t first = t * kRows;
    const int64_t valid = tiles.rows() - first < kRows ? tiles.rows() - first : kRows;
    if (act.terms() == 2) {
      tile_product<kHalves, 2>(view, tiles.blocks(), act, y, ldy, first, valid);
    } else {
      tile_product<kHalves, 1>(view, tiles.blocks(), act, y, ldy, first, valid);
    }
  }
}

}  // namespace

void row_tiles_amx(const RowTiles& tiles, const AmxActivations& act, float* y, int64_t ldy,
                   int64_t tile_begin, int64_t tile_end) {
  static const TileConfig blocks = tile_config(false);
  static const TileConfig halves = tile_config(true);
  _tile_loadconfig(tiles.format() == TileFormat::kHalves ? &halves : &blocks);
  constexpr Nibbles kWithM = Nibbles::kWithM;
  switch (tiles.format()) {
    case TileFormat::kBytes:
      tiles_product<TileFormat::kBytes, kWithM>(tiles, act, y, ldy, tile_begin, tile_end);
      break;
    case TileFormat::kHalves:
      tiles_product<TileFormat::kHalves, kWithM>(tiles, act, y, ldy, tile_begin, tile_end);
      break;
    case TileFormat::kSuperNibbles:
      tiles_product<TileFormat::kSuperNibbles, kWithM>(tiles, act, y, ldy, tile_begin, tile_end);
      break;
    case TileFormat::kNibbles:
      if (tiles.type() == DType::kQ4_0) {
        tiles_product<TileFormat::kNibbles, Nibbles::kQ4_0>(tiles, act, y, ldy, tile_begin,
                                                            tile_end);
      } else if (tiles.type() == DType::kIQ4_NL) {
        tiles_product<TileFormat::kNibbles, Nibbles::kIQ4_NL>(tiles, act, y, ldy, tile_begin,
                                                              tile_end);
      } else {
        tiles_product<TileFormat::kNibbles, kWithM>(tiles, act, y, ldy, tile_begin, tile_end);
      }
      break;
  }
  _tile_release();
}

}  // namespace duet::onednn::detail
