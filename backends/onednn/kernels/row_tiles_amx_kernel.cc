// The row-tile product on AMX-INT8 (row_tiles_amx.h).
//
// Per weight tile: the tile's blocks as AMX weight tiles (kBytes and kHalves
// as stored; the nibble, fifth-bit and six-bit formats unpacked into the
// kHalves layout, once per tile into a scratch copy or, for few activation
// groups, block by block into a small ring), then, for each group of 16 activation rows, the blocks
// in order: one tdpbsud per term (kHalves: per half and term) into int32
// tiles stored to the stack, then folded into 16 f32 accumulators, one per
// activation row, with the VNNI kernel's float operations. On the Xeon of
// 2026-12-05 a tdpbsud takes ~5.3 ns whatever its K (up to 64), a
// tilestored ~4.8 ns: each block's sums cost about as much to store as to
// compute, and its fold, ~100 vector instructions, as much again; see
// tile_product for how they are interleaved.
//
// Tile registers (numbers, as the intrinsics stringify them), for whole
// blocks (kHalves: half blocks, K = 16):
//   tmm0, tmm7  weights, K/4 x 64 bytes (tmm7: kHalves' second half)
//   tmm1, tmm2  the first and second term, 16 x K bytes
//   tmm3, tmm4  the terms' sums, 16 x 16 int32, of even blocks (kHalves:
//               of every block's first half)
//   tmm5, tmm6  the same of odd blocks (kHalves: of the second halves)

#include <cstdint>

#include "kernels/amx_tiles.h"
#include "kernels/avx512_intrinsics.h"
#include "kernels/qgemv_paths.h"
#include "kernels/row_tiles_amx.h"
#include "kernels/row_tiles_blocks.h"

namespace duet::onednn::detail {
namespace {

constexpr int kRows = RowTiles::kRows;
constexpr int64_t kTileBytes = AmxActivations::kTileBytes;

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
// second half; unused for kBytes tiles, which derive m from d).
struct BlockView {
  const uint8_t* base;
  int64_t stride;
  int64_t d, m, d2, m2, w;
  // Block b sits at base + (b & mask) * stride: mask is all ones for a
  // whole tile, slots - 1 for a ring of a power-of-two number of slots.
  int64_t mask = -1;
  const uint8_t* block(int64_t b) const { return base + (b & mask) * stride; }
  const float* at(int64_t b, int64_t offset) const {
    return reinterpret_cast<const float*>(block(b) + offset);
  }
  const uint8_t* bytes(int64_t b) const { return block(b) + w; }
};

// The kHalves layout (row_tiles.h): d, d2, m, m2, then the weight vectors.
constexpr int64_t kHalvesStride = 4 * 64 + kVectorsPerBlock * 64;
constexpr BlockView halves_view(const uint8_t* base) {
  return BlockView{base, kHalvesStride, 0, 128, 64, 192, 256};
}
static_assert(kHalvesStride == 768, "row_tiles.h: a kHalves block is 768 bytes");

// Block b of tile `tile` (blocks block_bytes apart), of a format that needs
// unpacking, to `out` in the kHalves layout (d2 and m2 only for kSixBits).
template <TileFormat F, Offset N>
[[gnu::always_inline]] inline void unpack_block(const uint8_t* tile, int64_t block_bytes, int64_t b,
                                                uint8_t* out) {
  Block blk;
  if constexpr (super_blocks(F)) {
    blk = load_super_nibbles<F>(tile, b);
  } else {
    blk = load_block<F, N>(tile + b * block_bytes);
  }
  _mm512_store_ps(out, blk.d);
  _mm512_store_ps(out + 128, blk.m);
  if constexpr (half_scales(F)) {
    _mm512_store_ps(out + 64, blk.d2);
    _mm512_store_ps(out + 192, blk.m2);
  }
  for (int j = 0; j < kVectorsPerBlock; ++j) _mm512_store_si512(out + 256 + 64 * j, blk.w[j]);
}

// Whether f's blocks need unpacking before the tile unit can load them:
// all but kBytes and kHalves, whose stored vectors are B tiles already.
constexpr bool unpacked_format(TileFormat f) {
  return f != TileFormat::kBytes && f != TileFormat::kHalves;
}

// Tile t's blocks where the AMX weight tiles can load them: kBytes and
// kHalves tiles as stored, the others unpacked into the thread's scratch
// buffer in the kHalves layout (unpack_block).
template <TileFormat F, Offset N>
BlockView tile_blocks(const RowTiles& tiles, int64_t t) {
  const uint8_t* tile = tiles.tile(t);
  if constexpr (F == TileFormat::kBytes) {
    return BlockView{tile, tiles.block_bytes(), 0, 0, 0, 0, 64};
  } else if constexpr (F == TileFormat::kHalves) {
    return halves_view(tile);
  } else {
    uint8_t* out = thread_scratch(tiles.blocks() * kHalvesStride);
    for (int64_t b = 0; b < tiles.blocks(); ++b) {
      unpack_block<F, N>(tile, tiles.block_bytes(), b, out + b * kHalvesStride);
    }
    // GCC's tileloadd asm declares no memory input: keep these stores
    // before the tile loads that read them.
    asm volatile("" ::: "memory");
    return halves_view(out);
  }
}

// acc[i] += the stored sums of activation row i (two terms: 256 * first +
// second) times d * dx[i], plus m * sums[i]: row_tiles_vnni.cc's operations.
// dx and sums are 2 floats apart per row.
template <int Terms>
[[gnu::always_inline]] inline void fold(const int32_t* c_hi, const int32_t* c_lo, __m512 d,
                                        __m512 m, const float* dx, const float* sums, __m512* acc) {
#pragma GCC unroll 16
  for (int i = 0; i < kRows; ++i) {
    __m512i s = _mm512_load_si512(c_hi + kRows * i);
    if constexpr (Terms == 2) {
      s = _mm512_add_epi32(_mm512_slli_epi32(s, 8), _mm512_load_si512(c_lo + kRows * i));
    }
    acc[i] =
        _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(d, _mm512_set1_ps(dx[2 * i])), acc[i]);
    acc[i] = _mm512_fmadd_ps(m, _mm512_set1_ps(sums[2 * i]), acc[i]);
  }
}

// One block's int32 sums: [0] and [1] the first and second term (kHalves:
// of its first half; [2] and [3] those of its second).
using BlockSums = int32_t[4][kRows * kRows];

// Block b of `view` times the activation group's block at `a`: the tile
// loads and products, into tiles 3 and 4 (Odd: 5 and 6; kHalves: 3, 4 for
// the first half and 5, 6 for the second, whatever Odd), stored by
// store_sums with the same Odd.
template <bool Halves, int Terms, bool Odd>
[[gnu::always_inline]] inline void products(const BlockView& view, const int8_t* a, int64_t b) {
  const uint8_t* w = view.bytes(b);
  _tile_loadd(0, w, 64);
  _tile_loadd(1, a, RowTiles::kBlock);
  if constexpr (Terms == 2) _tile_loadd(2, a + kTileBytes, RowTiles::kBlock);
  if constexpr (!Halves && !Odd) {
    _tile_zero(3);
    _tile_dpbsud(3, 1, 0);
    if constexpr (Terms == 2) {
      _tile_zero(4);
      _tile_dpbsud(4, 2, 0);
    }
  } else if constexpr (!Halves) {
    _tile_zero(5);
    _tile_dpbsud(5, 1, 0);
    if constexpr (Terms == 2) {
      _tile_zero(6);
      _tile_dpbsud(6, 2, 0);
    }
  } else {
    _tile_loadd(7, w + 256, 64);
    _tile_zero(3);
    _tile_dpbsud(3, 1, 0);
    if constexpr (Terms == 2) {
      _tile_zero(4);
      _tile_dpbsud(4, 2, 0);
    }
    _tile_loadd(1, a + 16, RowTiles::kBlock);
    _tile_zero(5);
    _tile_dpbsud(5, 1, 7);
    if constexpr (Terms == 2) {
      _tile_loadd(2, a + kTileBytes + 16, RowTiles::kBlock);
      _tile_zero(6);
      _tile_dpbsud(6, 2, 7);
    }
  }
}

// The sums products() left in the tiles, to `sums`.
template <bool Halves, int Terms, bool Odd>
[[gnu::always_inline]] inline void store_sums(BlockSums& sums) {
  if constexpr (!Halves && !Odd) {
    _tile_stored(3, sums[0], 64);
    if constexpr (Terms == 2) _tile_stored(4, sums[1], 64);
  } else if constexpr (!Halves) {
    _tile_stored(5, sums[0], 64);
    if constexpr (Terms == 2) _tile_stored(6, sums[1], 64);
  } else {
    _tile_stored(3, sums[0], 64);
    _tile_stored(5, sums[2], 64);
    if constexpr (Terms == 2) {
      _tile_stored(4, sums[1], 64);
      _tile_stored(6, sums[3], 64);
    }
  }
}

// Block b's sums folded into acc; `a` is the activation group's block b.
// M: kStored where the view holds m, else the offset m derives from.
template <bool Halves, int Terms, Offset M>
[[gnu::always_inline]] inline void fold_block(const BlockView& view, const int8_t* a, int64_t b,
                                              const BlockSums& sums, __m512* acc) {
  const auto* dx = reinterpret_cast<const float*>(a + Terms * kTileBytes);
  const __m512 d = _mm512_load_ps(view.at(b, view.d));
  const __m512 m = M == Offset::kStored ? _mm512_load_ps(view.at(b, view.m))
                                        : _mm512_mul_ps(d, _mm512_set1_ps(derived_m(M)));
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
// shows, against every activation group. A tile store is microcoded: one
// that waits for its product holds up every instruction behind it, so
// block b + 1's products are issued, block b's sums folded meanwhile, and
// only then block b + 1's sums stored; consecutive blocks take alternate
// sum tiles, so that a block's products need not wait for the store of the
// block before to read its tiles (kHalves, whose blocks take all four sum
// tiles, still waits).
//
// unpack(b) is called before block b's products of each group (a no-op
// unless the blocks are unpacked into a ring as they go: tiles_product).
// `next` (null for none) is the next tile's stored bytes, block_bytes a
// block: each block's lines are prefetched while the first group takes
// that block of this tile, so that the weights keep streaming from memory
// while the tile unit works (with one activation group, a batched decode
// step, they would otherwise arrive in bursts, when the next tile is
// unpacked, with the tile unit idle).
template <bool Halves, int Terms, Offset M, class Unpack>
void tile_product(const BlockView& view, int64_t blocks, const AmxActivations& act, float* y,
                  int64_t ldy, int64_t first, int64_t valid, const uint8_t* next,
                  int64_t block_bytes, const Unpack& unpack) {
  alignas(64) BlockSums sums;
  const auto mask = static_cast<__mmask16>((uint32_t{1} << valid) - 1);
  const int64_t stride = act.block_bytes();
  for (int64_t g = 0; g < act.groups(); ++g) {
    __m512 acc[kRows];
    for (__m512& a : acc) a = _mm512_setzero_ps();
    const int8_t* a = act.block(g, 0);  // block b at a + b * stride
    unpack(0);
    products<Halves, Terms, false>(view, a, 0);
    store_sums<Halves, Terms, false>(sums);
    auto prefetch_next = [&](int64_t b) {
      if (g != 0 || next == nullptr) return;
      for (int64_t line = 0; line < block_bytes; line += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(next + b * block_bytes + line), _MM_HINT_T0);
      }
    };
    for (int64_t b = 0; b < blocks; b += 2) {  // b even: its sums came from tiles 3, 4
      prefetch_next(b);
      prefetch_next(b + 1);
      if (b + 1 < blocks) {
        unpack(b + 1);
        products<Halves, Terms, true>(view, a + (b + 1) * stride, b + 1);
      }
      fold_block<Halves, Terms, M>(view, a + b * stride, b, sums, acc);
      if (b + 1 >= blocks) break;
      store_sums<Halves, Terms, true>(sums);
      if (b + 2 < blocks) {
        unpack(b + 2);
        products<Halves, Terms, false>(view, a + (b + 2) * stride, b + 2);
      }
      fold_block<Halves, Terms, M>(view, a + (b + 1) * stride, b + 1, sums, acc);
      if (b + 2 < blocks) store_sums<Halves, Terms, false>(sums);
    }
    const int64_t rows = act.rows() - g * kRows;
    float* out = y + g * kRows * ldy + first;
#pragma GCC unroll 16
    for (int i = 0; i < kRows; ++i) {  // constant indices: acc stays in registers
      if (i < rows) _mm512_mask_storeu_ps(out + i * ldy, mask, acc[i]);
    }
  }
}

// Products of at most this many activation groups unpack a tile's
// blocks one at a time, kUnpackAhead blocks ahead of their products, into a
// ring of kRingBlocks that stays in L1 — once per group — instead of the
// whole tile once into a scratch copy that the groups share. A tile load
// takes nothing from stores still in the store buffer: one right behind the
// stores that unpacked its block waits for them to reach L1 (on the Xeon of
// 2026-12-05, `qgemv_bench --benchmark_filter=amx/q4_1_.*/t1/n16`: 77.7-81.3
// us unpacking each block just before its products, 70.0-75.1 one block
// ahead, 63.8-66.3 two; 3 and 4 no better). On the Xeon with AMX of
// 2026-12-05 (SmolLM2 Q4_1, 2 threads, alternated runs of `duet bench
// configs/smollm2-batch.yaml`): a step of 16 sequences 19.4-19.9 -> 17.9-18.0
// ms, of 32 36-37 -> 35-35.6 ms (the ring up to 2 groups against 1), 48 and
// 64 sequences 2-3% faster with the ring up to 4 groups than up to 2; a
// 512-token prompt 6-8% slower with the ring, 128 tokens level.
constexpr int64_t kRingGroups = 4;
constexpr int64_t kUnpackAhead = 2;
constexpr int64_t kRingBlocks = 8;  // a power of two, more than kUnpackAhead + 2

template <TileFormat F, Offset N>
void tiles_product(const RowTiles& tiles, const AmxActivations& act, float* y, int64_t ldy,
                   int64_t tile_begin, int64_t tile_end) {
  constexpr bool kHalves = half_scales(F);
  // Unpacked and kHalves views hold m; kBytes (q8_0) tiles derive it.
  constexpr Offset kM = F == TileFormat::kBytes ? N : Offset::kStored;
  const int64_t block_bytes = tiles.block_bytes();
  for (int64_t t = tile_begin; t < tile_end; ++t) {
    const int64_t first = t * kRows;
    const int64_t valid = tiles.rows() - first < kRows ? tiles.rows() - first : kRows;
    const uint8_t* next = t + 1 < tile_end ? tiles.tile(t + 1) : nullptr;
    auto run = [&](const BlockView& view, const auto& unpack) {
      if (act.terms() == 2) {
        tile_product<kHalves, 2, kM>(view, tiles.blocks(), act, y, ldy, first, valid, next,
                                     block_bytes, unpack);
      } else {
        tile_product<kHalves, 1, kM>(view, tiles.blocks(), act, y, ldy, first, valid, next,
                                     block_bytes, unpack);
      }
    };
    if constexpr (unpacked_format(F)) {
      if (act.groups() <= kRingGroups) {
        uint8_t* ring = thread_scratch(kRingBlocks * kHalvesStride);
        BlockView view = halves_view(ring);
        view.mask = kRingBlocks - 1;
        const uint8_t* tile = tiles.tile(t);
        auto unpack = [&](int64_t b) {
          unpack_block<F, N>(tile, block_bytes, b, ring + (b & view.mask) * kHalvesStride);
        };
        run(view, [&](int64_t b) {
          if (b == 0) {
            for (int64_t i = 0; i <= kUnpackAhead && i < tiles.blocks(); ++i) unpack(i);
          } else if (b + kUnpackAhead < tiles.blocks()) {
            unpack(b + kUnpackAhead);
          }
          asm volatile("" ::: "memory");  // the stores before the tile loads (tile_blocks)
        });
        continue;
      }
    }
    run(tile_blocks<F, N>(tiles, t), [](int64_t) {});
  }
}

}  // namespace

void row_tiles_amx(const RowTiles& tiles, const AmxActivations& act, float* y, int64_t ldy,
                   int64_t tile_begin, int64_t tile_end) {
  static const TileConfig blocks = tile_config(false);
  static const TileConfig halves = tile_config(true);
  // Released however the call ends (the scratch buffer may throw).
  const ConfiguredTiles configured(half_scales(tiles.format()) ? halves : blocks);
  with_tile_format(tiles, [&]<TileFormat F, Offset N>() {
    tiles_product<F, N>(tiles, act, y, ldy, tile_begin, tile_end);
  });
}

}  // namespace duet::onednn::detail
