// kernels/row_tiles_blocks.h — a row tile's block unpacked into AVX-512
// registers: its rows' scales and the 8 byte vectors whose vector j holds
// elements 4j..4j+3 of each of the 16 rows (row_tiles.h's kBytes layout).
// The VNNI kernel multiplies them in registers; the AMX kernel stores them
// as a B tile, which has that same layout.
//
// Internal to the row-tile kernels, and included only by sources compiled
// with AVX-512 BW: every function has internal linkage, so each of those
// files keeps its own copy, built with its own flags.
#pragma once

#include <array>
#include <cstdint>
#include <utility>

#include "duet/block_formats.h"
#include "kernels/avx512_intrinsics.h"
#include "kernels/row_tiles.h"

namespace duet::onednn::detail {
namespace {  // NOLINT(google-build-namespaces): see above

constexpr int kVectorsPerBlock = RowTiles::kBlock / 4;  // weight vectors of a block

// One block of a tile, unpacked: its rows' scales (kHalves: d and m of the
// first half, d2 and m2 of the second) and the 8 weight vectors whose vector
// j pairs with activation bytes 4j..4j+3.
struct Block {
  __m512 d;
  __m512 m;
  __m512 d2;
  __m512 m2;
  __m512i w[kVectorsPerBlock];
};

// Where a tile's m comes from (and, for iq4_nl, what its nibbles index):
// stored beside d, or d times the constant offset of a format whose
// quants are centred on one (row_tiles.h).
enum class Offset {
  kStored,  // q4_1, q5_1 and the K-quants: m as stored (or from dmin)
  kQ4_0,    // u is the nibble, m = -8d
  kQ5_0,    // u = q (0..31), m = -16d
  kQ8_0,    // u = q + 128, m = -128d
  kIQ4_NL,  // u = the nibble's level + 128, m = -128d
};

// m / d for a derived offset.
constexpr float derived_m(Offset n) {
  return n == Offset::kQ4_0 ? -8.0f : n == Offset::kQ5_0 ? -16.0f : -128.0f;
}

// iq4_nl's 16 levels + 128 (1..241): vpshufb's table, in each 128-bit lane.
alignas(16) constexpr std::array<uint8_t, 16> kIQ4NLBytes = [] {
  std::array<uint8_t, 16> bytes{};
  for (size_t i = 0; i < bytes.size(); ++i) {
    bytes[i] = static_cast<uint8_t>(duet::blocks::kIQ4NLLevels[i] + 128);
  }
  return bytes;
}();

// fn.template operator()<F, N>() for the format F of `tiles` and where its
// m comes from (N): each kernel's one switch from a tile type to its
// template instance.
template <class Fn>
decltype(auto) with_tile_format(const RowTiles& tiles, const Fn& fn) {
  constexpr Offset kStored = Offset::kStored;
  switch (tiles.format()) {
    case TileFormat::kBytes:  // q8_0
      return fn.template operator()<TileFormat::kBytes, Offset::kQ8_0>();
    case TileFormat::kFiveBits:
      if (tiles.type() == DType::kQ5_0) {
        return fn.template operator()<TileFormat::kFiveBits, Offset::kQ5_0>();
      }
      return fn.template operator()<TileFormat::kFiveBits, kStored>();
    case TileFormat::kHalves:
      return fn.template operator()<TileFormat::kHalves, kStored>();
    case TileFormat::kSixBits:
      return fn.template operator()<TileFormat::kSixBits, kStored>();
    case TileFormat::kSuperNibbles:
      return fn.template operator()<TileFormat::kSuperNibbles, kStored>();
    case TileFormat::kSuperFiveBits:
      return fn.template operator()<TileFormat::kSuperFiveBits, kStored>();
    case TileFormat::kNibbles:
      break;
  }
  if (tiles.type() == DType::kQ4_0)
    return fn.template operator()<TileFormat::kNibbles, Offset::kQ4_0>();
  if (tiles.type() == DType::kIQ4_NL) {
    return fn.template operator()<TileFormat::kNibbles, Offset::kIQ4_NL>();
  }
  return fn.template operator()<TileFormat::kNibbles, kStored>();
}

// The 4 nibble vectors at q (kNibbles' layout) as w's 8 byte vectors:
// w[j] the low nibbles of vector j (elements 4j..4j+3), w[4 + j] its high.
[[gnu::always_inline]] inline void unpack_nibbles(const uint8_t* q,
                                                  __m512i (&w)[kVectorsPerBlock]) {
  const __m512i nibble = _mm512_set1_epi8(0x0f);
  for (int j = 0; j < kVectorsPerBlock / 2; ++j) {
    const __m512i v = _mm512_load_si512(q + 64 * j);
    w[j] = _mm512_and_si512(v, nibble);
    w[kVectorsPerBlock / 2 + j] = _mm512_and_si512(_mm512_srli_epi16(v, 4), nibble);
  }
}

// The Bits high bits of each element from the planes at `planes` (64 bytes
// each) into bits 4.. of w's bytes: bits Bits*J.. of each byte of the
// planes, counted across them, belong to w[J] (kFiveBits and kSuperFiveBits:
// one plane of fifth bits; kSixBits: two of high pairs; row_tiles.h). A
// shift and one vpternlogd per vector.
template <int Bits>
[[gnu::always_inline]] inline void join_high_bits(const uint8_t* planes,
                                                  __m512i (&w)[kVectorsPerBlock]) {
  const __m512i mask = _mm512_set1_epi8(static_cast<char>(((1 << Bits) - 1) << 4));
  auto join = [&]<int J>() {
    const __m512i h = _mm512_load_si512(planes + 64 * (Bits * J / 8));
    constexpr int kShift = 4 - Bits * J % 8;  // bit Bits*J (of its plane's byte) to bit 4
    // Within each 16-bit lane: neither byte's bits cross into the other's 4..4+Bits.
    const __m512i at4 = kShift > 0   ? _mm512_slli_epi16(h, kShift)
                        : kShift < 0 ? _mm512_srli_epi16(h, -kShift)
                                     : h;
    w[J] = _mm512_ternarylogic_epi32(w[J], at4, mask, 0xf8);  // w | (at4 & mask)
  };
  [&]<int... J>(std::integer_sequence<int, J...>) { (join.template operator()<J>(), ...); }
  (std::make_integer_sequence<int, kVectorsPerBlock>());
}

// The tile block at p of format F, its m from N.
template <TileFormat F, Offset N>
[[gnu::always_inline]] inline Block load_block(const uint8_t* p) {
  Block blk;
  blk.d2 = blk.m2 = _mm512_setzero_ps();  // kHalves' second half; unused by the others
  if constexpr (F == TileFormat::kBytes) {
    blk.d = _mm512_load_ps(p);
    blk.m = _mm512_mul_ps(blk.d, _mm512_set1_ps(derived_m(N)));
    for (int j = 0; j < kVectorsPerBlock; ++j) blk.w[j] = _mm512_load_si512(p + 64 + 64 * j);
  } else if constexpr (F == TileFormat::kSixBits) {
    constexpr int kRows = RowTiles::kRows;
    const __m512 d = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(p)));
    auto half_d = [&](int h) {
      const __m128i sc =
          _mm_load_si128(reinterpret_cast<const __m128i*>(p + 2 * kRows + kRows * h));
      return _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(sc)));
    };
    blk.d = half_d(0);
    blk.d2 = half_d(1);
    blk.m = _mm512_mul_ps(blk.d, _mm512_set1_ps(-32.0f));  // q6_k's offset
    blk.m2 = _mm512_mul_ps(blk.d2, _mm512_set1_ps(-32.0f));
    unpack_nibbles(p + 4 * kRows, blk.w);
    join_high_bits<2>(p + 4 * kRows + 64 * kVectorsPerBlock / 2, blk.w);
  } else if constexpr (F == TileFormat::kHalves) {
    blk.d = _mm512_load_ps(p);
    blk.d2 = _mm512_load_ps(p + 64);
    blk.m = _mm512_load_ps(p + 128);
    blk.m2 = _mm512_load_ps(p + 192);
    for (int j = 0; j < kVectorsPerBlock; ++j) blk.w[j] = _mm512_load_si512(p + 256 + 64 * j);
  } else {
    blk.d = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(p)));
    if constexpr (N == Offset::kStored) {
      blk.m = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(p + 32)));
    } else {
      blk.m = _mm512_mul_ps(blk.d, _mm512_set1_ps(derived_m(N)));
    }
    unpack_nibbles(p + 64, blk.w);
    if constexpr (F == TileFormat::kFiveBits) {
      join_high_bits<1>(p + 64 + 64 * kVectorsPerBlock / 2, blk.w);
    }
    if constexpr (N == Offset::kIQ4_NL) {
      const __m512i levels = _mm512_broadcast_i32x4(
          _mm_load_si128(reinterpret_cast<const __m128i*>(kIQ4NLBytes.data())));
      for (__m512i& w : blk.w) w = _mm512_shuffle_epi8(levels, w);
    }
  }
  return blk;
}

// Block b of the kSuperNibbles or kSuperFiveBits (F) tile at `tile`: d =
// super d * scale and m = -(super dmin * min), both exact in f32 (an 11-bit
// significand times a 6-bit integer).
template <TileFormat F>
[[gnu::always_inline]] inline Block load_super_nibbles(const uint8_t* tile, int64_t b) {
  static_assert(super_blocks(F));
  constexpr int kRows = RowTiles::kRows;
  constexpr int64_t kSuperBytes =
      F == TileFormat::kSuperFiveBits ? RowTiles::kSuperFiveBytes : RowTiles::kSuperBytes;
  const int64_t s = b % RowTiles::kSubBlocks;
  const uint8_t* p = RowTiles::super_block(tile, b, kSuperBytes);
  auto bytes_as_floats = [](const uint8_t* q) {
    return _mm512_cvtepi32_ps(
        _mm512_cvtepu8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(q))));
  };
  Block blk;
  blk.d2 = blk.m2 = _mm512_setzero_ps();
  const __m512 d = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(p)));
  const __m512 dmin = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(p + 32)));
  blk.d = _mm512_mul_ps(d, bytes_as_floats(p + RowTiles::kSuperScalesAt + s * kRows));
  const __m512 dm = _mm512_mul_ps(dmin, bytes_as_floats(p + RowTiles::kSuperMinsAt + s * kRows));
  blk.m = _mm512_castsi512_ps(  // -(dmin * min): the sign flipped, as the other formats store m
      _mm512_xor_si512(_mm512_castps_si512(dm), _mm512_set1_epi32(INT32_MIN)));
  const uint8_t* q = RowTiles::super_nibbles(tile, b, kSuperBytes);
  const __m512i nibble = _mm512_set1_epi8(0x0f);
  for (int j = 0; j < kVectorsPerBlock; ++j) {
    const __m512i v = _mm512_load_si512(q + 64 * j);
    blk.w[j] = _mm512_and_si512(s % 2 == 0 ? v : _mm512_srli_epi16(v, 4), nibble);
  }
  if constexpr (F == TileFormat::kSuperFiveBits) {
    join_high_bits<1>(p + RowTiles::kSuperBytes + 64 * s, blk.w);
  }
  return blk;
}

}  // namespace
}  // namespace duet::onednn::detail
