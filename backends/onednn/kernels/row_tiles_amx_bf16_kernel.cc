// The row-tile product on AMX-BF16 (row_tiles_amx_bf16.h): the tile unit's
// work and the bf16 splits. Built with AMX and AVX-512 BF16/VBMI flags;
// row_tiles_amx_bf16.cc checks amx_bf16_usable() before calling in.
//
// Tile registers (numbers, as the intrinsics stringify them):
//   tmm0..tmm3  f32 sums, 16 x 16: tmm(2g + t) for activation group g and
//               weight tile t of the pair (g, t in {0, 1})
//   tmm4, tmm5  the weight tiles' hi (then lo) bf16 pairs, 16 x 64 bytes
//   tmm6, tmm7  the activation groups' hi (then lo) values, 16 x 64 bytes
// Each sum tile takes three products per block with three or more others
// between them: a tile product's latency is about three times its issue
// interval, and one sum tile alone would leave the unit waiting.
#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>

#include "kernels/amx_tiles.h"
#include "kernels/avx512_intrinsics.h"
#include "kernels/qgemv_paths.h"
#include "kernels/row_tiles_amx_bf16.h"
#include "kernels/row_tiles_blocks.h"

namespace duet::onednn::detail {
namespace {

constexpr int kRows = RowTiles::kRows;
constexpr int64_t kTileBytes = AmxBf16Rows::kTileBytes;
constexpr int64_t kBlockBytes = AmxBf16Rows::kBlockBytes;
static_assert(AmxBf16Rows::kRows == kRows, "a group's rows fill a tile's rows");
static_assert(kTileBytes == 1024, "a 16 x 32 bf16 tile");

// Every tile 16 rows of 64 bytes: sums (16 f32), weight pairs (16 columns
// of two bf16), activations (32 bf16).
TileConfig tile_config() {
  TileConfig c;
  for (int t = 0; t < 8; ++t) {
    c.rows[t] = kRows;
    c.colsb[t] = 64;
  }
  return c;
}

// The 32 bf16 nearest v0 (lanes 0..15) and v1 (16..31) to hi, the bf16
// nearest what remains of each to lo (64 bytes each).
[[gnu::always_inline]] inline void split(__m512 v0, __m512 v1, uint8_t* hi, uint8_t* lo) {
  const auto h = std::bit_cast<__m512i>(_mm512_cvtne2ps_pbh(v1, v0));
  const __m512 h0 =
      _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(h)), 16));
  const __m512 h1 = _mm512_castsi512_ps(
      _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(h, 1)), 16));
  const auto l =
      std::bit_cast<__m512i>(_mm512_cvtne2ps_pbh(_mm512_sub_ps(v1, h1), _mm512_sub_ps(v0, h0)));
  _mm512_store_si512(hi, h);
  _mm512_store_si512(lo, l);
}

// As split(), hi by truncation (v's upper 16 bits): six instructions per
// pair of vectors instead of nine, for the weights, which are split once
// per product (64 sequences decoding: +3% to +8% tokens/s in three
// alternated pairs); lo then holds up to 2^-7 of v, rounded to 2^-9 of
// itself, so that the products' error about doubles (still ~5x below two
// 8-bit activation terms).
[[gnu::always_inline]] inline void split_truncated(__m512 v0, __m512 v1, uint8_t* hi, uint8_t* lo) {
  const __m512i upper = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
  const __m512 h0 = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(v0), upper));
  const __m512 h1 = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(v1), upper));
  _mm512_store_si512(hi, std::bit_cast<__m512i>(_mm512_cvtne2ps_pbh(h1, h0)));
  _mm512_store_si512(lo, std::bit_cast<__m512i>(
                             _mm512_cvtne2ps_pbh(_mm512_sub_ps(v1, h1), _mm512_sub_ps(v0, h0))));
}

// vpermb indices that turn a weight vector (bytes 4c..4c+3: elements
// 4j..4j+3 of weight row c) into the pairs of two B-tile rows: bytes 0..31
// elements 4j, 4j+1 of rows 0..15 in turn, bytes 32..63 elements 4j+2, 4j+3.
alignas(64) constexpr std::array<uint8_t, 64> kPairBytes = [] {
  std::array<uint8_t, 64> idx{};
  for (int t = 0; t < 64; ++t) {
    const int half = t / 32;
    const int u = t % 32;
    idx[static_cast<size_t>(t)] = static_cast<uint8_t>(4 * (u / 2) + 2 * half + u % 2);
  }
  return idx;
}();

// Lanes [v0, v0, v1, v1, ...] of rows 0..7 (first) or 8..15 of a scale vector.
[[gnu::always_inline]] inline __m512 pairs(__m512 v, bool upper) {
  const __m512i lower_rows = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
  return _mm512_permutexvar_ps(
      upper ? _mm512_add_epi32(lower_rows, _mm512_set1_epi32(8)) : lower_rows, v);
}

// Bytes 16Q..16Q + 15 of r (unsigned), as f32.
template <int Q>
[[gnu::always_inline]] inline __m512 quarter(__m512i r) {
  return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm512_extracti32x4_epi32(r, Q)));
}

// One block, unpacked, as a B tile of hi pairs and one of lo pairs at out
// (2 KiB): pair row p holds elements 2p, 2p+1 of each of the 16 weight rows,
// each d * u + m of its (half) block.
[[gnu::always_inline]] inline void store_block(const Block& blk, bool halves, uint8_t* out) {
  const __m512i perm = _mm512_load_si512(kPairBytes.data());
  for (int half = 0; half < 2; ++half) {
    const __m512 d = halves && half == 1 ? blk.d2 : blk.d;
    const __m512 m = halves && half == 1 ? blk.m2 : blk.m;
    const __m512 d0 = pairs(d, false), d1 = pairs(d, true);
    const __m512 m0 = pairs(m, false), m1 = pairs(m, true);
    for (int jj = 0; jj < kVectorsPerBlock / 2; ++jj) {
      const int j = half * kVectorsPerBlock / 2 + jj;
      const __m512i r = _mm512_permutexvar_epi8(perm, blk.w[j]);
      uint8_t* row = out + 2 * j * 64;
      split_truncated(_mm512_fmadd_ps(quarter<0>(r), d0, m0),
                      _mm512_fmadd_ps(quarter<1>(r), d1, m1), row, row + kTileBytes);
      split_truncated(_mm512_fmadd_ps(quarter<2>(r), d0, m0),
                      _mm512_fmadd_ps(quarter<3>(r), d1, m1), row + 64, row + 64 + kTileBytes);
    }
  }
}

// Tile t's blocks into out, kBlockBytes each.
template <TileFormat F, Offset N>
void unpack_tile(const RowTiles& tiles, int64_t t, uint8_t* out) {
  const uint8_t* tile = tiles.tile(t);
  for (int64_t b = 0; b < tiles.blocks(); ++b) {
    Block blk;
    if constexpr (super_blocks(F)) {
      blk = load_super_nibbles<F>(tile, b);
    } else {
      blk = load_block<F, N>(tile + b * tiles.block_bytes());
    }
    store_block(blk, half_scales(F), out + b * kBlockBytes);
  }
}

using UnpackTile = void (*)(const RowTiles&, int64_t, uint8_t*);

UnpackTile unpacker(const RowTiles& tiles) {
  return with_tile_format(tiles,
                          []<TileFormat F, Offset N>() -> UnpackTile { return unpack_tile<F, N>; });
}

// The sums of G activation groups (blocks at a0, a1) and T weight tiles
// (unpacked at w0, w1) over `blocks` blocks, left in tmm0..tmm3.
template <int G, int T>
[[gnu::always_inline]] inline void sums(const uint8_t* a0, const uint8_t* a1, const uint8_t* w0,
                                        const uint8_t* w1, int64_t blocks) {
  _tile_zero(0);
  if constexpr (T == 2) _tile_zero(1);
  if constexpr (G == 2) _tile_zero(2);
  if constexpr (G == 2 && T == 2) _tile_zero(3);
  // The products of weight tiles 4, 5 with activation tiles 6, 7.
  auto products = [] {
    _tile_dpbf16ps(0, 6, 4);
    if constexpr (T == 2) _tile_dpbf16ps(1, 6, 5);
    if constexpr (G == 2) _tile_dpbf16ps(2, 7, 4);
    if constexpr (G == 2 && T == 2) _tile_dpbf16ps(3, 7, 5);
  };
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t at = b * kBlockBytes;
    _tile_loadd(4, w0 + at, 64);  // weights hi
    if constexpr (T == 2) _tile_loadd(5, w1 + at, 64);
    _tile_loadd(6, a0 + at, 64);  // activations hi
    if constexpr (G == 2) _tile_loadd(7, a1 + at, 64);
    products();
    _tile_loadd(6, a0 + at + kTileBytes, 64);  // activations lo
    if constexpr (G == 2) _tile_loadd(7, a1 + at + kTileBytes, 64);
    products();
    _tile_loadd(4, w0 + at + kTileBytes, 64);  // weights lo
    if constexpr (T == 2) _tile_loadd(5, w1 + at + kTileBytes, 64);
    _tile_loadd(6, a0 + at, 64);  // activations hi again
    if constexpr (G == 2) _tile_loadd(7, a1 + at, 64);
    products();
  }
}

// A sum tile to rows [0, rows) and columns [0, cols) of y (ldy apart);
// store(p, stride) stores the tile (the intrinsics take its number as a
// literal).
template <class Store>
[[gnu::always_inline]] inline void store_sums(float* y, int64_t ldy, int64_t rows, int64_t cols,
                                              const Store& store) {
  if (rows == kRows && cols == kRows) {
    store(y, ldy * static_cast<int64_t>(sizeof(float)));
    return;
  }
  alignas(64) float part[kRows * kRows];
  store(part, kRows * static_cast<int64_t>(sizeof(float)));
  const auto mask = static_cast<__mmask16>((uint32_t{1} << cols) - 1);
  for (int64_t i = 0; i < rows; ++i) {
    _mm512_mask_storeu_ps(y + i * ldy, mask, _mm512_load_ps(part + i * kRows));
  }
}

}  // namespace

void row_tiles_amx_bf16(const RowTiles& tiles, const AmxBf16Rows& act, float* y, int64_t ldy,
                        int64_t tile_begin, int64_t tile_end) {
  static const TileConfig config = tile_config();
  // Released however the call ends (the scratch buffer may throw).
  const ConfiguredTiles configured(config);
  const int64_t blocks = tiles.blocks();
  const UnpackTile unpack = unpacker(tiles);
  uint8_t* w = thread_scratch(2 * blocks * kBlockBytes);
  for (int64_t t = tile_begin; t < tile_end; t += 2) {
    const bool two_tiles = t + 1 < tile_end;
    unpack(tiles, t, w);
    if (two_tiles) unpack(tiles, t + 1, w + blocks * kBlockBytes);
    // GCC's tileloadd asm declares no memory input: keep the stores above
    // before the tile loads that read them.
    asm volatile("" ::: "memory");
    const uint8_t* w0 = w;
    const uint8_t* w1 = w + blocks * kBlockBytes;
    const int64_t first = t * kRows;
    const int64_t cols0 = std::min<int64_t>(kRows, tiles.rows() - first);
    const int64_t cols1 = two_tiles ? std::min<int64_t>(kRows, tiles.rows() - first - kRows) : 0;
    for (int64_t g = 0; g < act.groups(); g += 2) {
      const bool two_groups = g + 1 < act.groups();
      const uint8_t* a0 = act.block(g, 0);
      const uint8_t* a1 = two_groups ? act.block(g + 1, 0) : nullptr;
      if (two_groups && two_tiles) {
        sums<2, 2>(a0, a1, w0, w1, blocks);
      } else if (two_groups) {
        sums<2, 1>(a0, a1, w0, w1, blocks);
      } else if (two_tiles) {
        sums<1, 2>(a0, a1, w0, w1, blocks);
      } else {
        sums<1, 1>(a0, a1, w0, w1, blocks);
      }
      const int64_t rows0 = std::min<int64_t>(kRows, act.rows() - g * kRows);
      float* out = y + g * kRows * ldy + first;
      store_sums(out, ldy, rows0, cols0, [](float* p, int64_t s) { _tile_stored(0, p, s); });
      if (two_tiles) {
        store_sums(out + kRows, ldy, rows0, cols1,
                   [](float* p, int64_t s) { _tile_stored(1, p, s); });
      }
      if (two_groups) {
        const int64_t rows1 = std::min<int64_t>(kRows, act.rows() - (g + 1) * kRows);
        store_sums(out + kRows * ldy, ldy, rows1, cols0,
                   [](float* p, int64_t s) { _tile_stored(2, p, s); });
        if (two_tiles) {
          store_sums(out + kRows * ldy + kRows, ldy, rows1, cols1,
                     [](float* p, int64_t s) { _tile_stored(3, p, s); });
        }
      }
    }
  }
}

void pack_row_amx_bf16(const float* x, int64_t blocks, uint8_t* first_block, int64_t i) {
  for (int64_t b = 0; b < blocks; ++b) {
    uint8_t* blk = first_block + b * kBlockBytes;
    const float* xb = x + b * RowTiles::kBlock;
    split(_mm512_loadu_ps(xb), _mm512_loadu_ps(xb + 16), blk + i * 64, blk + kTileBytes + i * 64);
  }
}

}  // namespace duet::onednn::detail
