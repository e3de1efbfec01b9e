// duet/block_formats.h — the byte layout of every block-quantized type, the
// one place it is written down. Core's conversions (duet/quant.h), the
// onednn and cuda kernels and the KV caches take block sizes and field
// offsets from these structs (sizeof, offsetof, kBlockBytes<T>); kernels
// still index the elements inside a block themselves (the nibble halves of
// 4-bit blocks), as the comments below describe them.
//
// The layouts are ggml's, byte for byte, so GGUF files are used in place. A
// row of n elements is n / kElements consecutive blocks. Two families:
//
//  * 32-element blocks (q4_0, q4_1, q5_0, q5_1, q8_0, iq4_nl): element j
//    (0..15) is the low nibble of qs[j], element j + 16 its high nibble; q5_*
//    keep the fifth bit of element j in bit j of qh (little-endian 32 bits);
//    iq4_nl's nibble indexes a fixed table of 16 levels.
//  * 256-element super-blocks (the K-quants q2_k ... q6_k, and q8_k, the
//    activation format of K-quant dot products), split into sub-blocks of 16
//    or 32 elements that carry their own 4-, 6- or 8-bit scales.
//
// Every helper is a pure function of a block's bytes, usable from host C++
// and from CUDA device code alike (DUET_BLOCK_FN). Scales are returned as
// integers: how they are combined with the f16 super-scales, and in which
// order, is part of each consumer's rounding contract (duet/quant.h for the
// exact reference).
#pragma once

#include <array>
#include <cstdint>

#include "duet/dtype.h"

#if defined(__CUDACC__)
#define DUET_BLOCK_FN __host__ __device__ inline
#else
#define DUET_BLOCK_FN inline
#endif

namespace duet::blocks {

inline constexpr int kQK = 32;     // elements of a 32-element block
inline constexpr int kQK_K = 256;  // elements of a K-quant super-block

// ---- 32-element blocks ----------------------------------------------------

struct BlockQ4_0 {  // x = d * (q - 8)
  uint16_t d;       // f16
  uint8_t qs[kQK / 2];
};
struct BlockQ4_1 {  // x = d * q + m
  uint16_t d;       // f16
  uint16_t m;       // f16
  uint8_t qs[kQK / 2];
};
struct BlockQ5_0 {  // x = d * (q - 16)
  uint16_t d;       // f16
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
// x = d * kIQ4NLLevels[q], q the nibble of element j as in q4_0: a
// non-uniform 4-bit code (denser near zero, where weights are).
struct BlockIQ4_NL {
  uint16_t d;  // f16
  uint8_t qs[kQK / 2];
};
struct BlockQ5_1 {  // x = d * q + m
  uint16_t d;       // f16
  uint16_t m;       // f16
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
struct BlockQ8_0 {  // x = d * q
  uint16_t d;       // f16
  int8_t qs[kQK];
};

// ---- 256-element super-blocks -----------------------------------------------

// 16 sub-blocks of 16: x = (d * (scales[s] & 15)) * q - (dmin * (scales[s] >> 4)),
// q the 2 bits of q2_k_quant.
struct BlockQ2_K {
  uint8_t scales[kQK_K / 16];  // low nibble scale, high nibble min, per sub-block
  uint8_t qs[kQK_K / 4];
  uint16_t d;     // f16, super-block scale of the scales
  uint16_t dmin;  // f16, super-block scale of the mins
};
// 16 sub-blocks of 16: x = (d * (q3_k_scale - 32)) * q, q = 2 low bits
// minus 4 where the hmask bit is clear.
struct BlockQ3_K {
  uint8_t hmask[kQK_K / 8];
  uint8_t qs[kQK_K / 4];
  uint8_t scales[12];  // 16 6-bit scales, packed
  uint16_t d;          // f16
};
// 8 sub-blocks of 32: x = (d * sc) * q - (dmin * m), sc and m the 6-bit
// pair of k4_scale_min.
struct BlockQ4_K {
  uint16_t d;     // f16
  uint16_t dmin;  // f16
  uint8_t scales[12];
  uint8_t qs[kQK_K / 2];
};
// As q4_k with a fifth bit per element in qh.
struct BlockQ5_K {
  uint16_t d;     // f16
  uint16_t dmin;  // f16
  uint8_t scales[12];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
// 16 sub-blocks of 16: x = (d * scales[s]) * (q - 32), q 6 bits.
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  uint16_t d;  // f16
};
// x = d * qs[j]; bsums[i] is the sum of qs[16 i .. 16 i + 15].
struct BlockQ8_K {
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];
};

static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22 &&
                  sizeof(BlockQ5_1) == 24 && sizeof(BlockQ8_0) == 34 && sizeof(BlockIQ4_NL) == 18,
              "32-element blocks must match ggml's byte layout");
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110 && sizeof(BlockQ4_K) == 144 &&
                  sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210 && sizeof(BlockQ8_K) == 292,
              "K-quant super-blocks must match ggml's byte layout");

// ---- per-type traits ----------------------------------------------------------

// What a consumer needs to know of a block type without decoding it.
template <typename Block>
struct BlockTraits;

// The block struct of a block-quantized DType, for code templated on the type.
template <DType T>
struct BlockOf;

#define DUET_BLOCK_TRAITS(BLOCK, TYPE, ELEMENTS, HAS_MIN, SUB_BLOCK)              \
  template <>                                                                     \
  struct BlockOf<TYPE> {                                                          \
    using type = BLOCK;                                                           \
  };                                                                              \
  template <>                                                                     \
  struct BlockTraits<BLOCK> {                                                     \
    using Block = BLOCK;                                                          \
    static constexpr DType kType = TYPE;                                          \
    static constexpr int kElements = ELEMENTS;                                    \
    static constexpr int kBytes = static_cast<int>(sizeof(BLOCK));                \
    static constexpr bool kHasMin = HAS_MIN;    /* an offset besides the scale */ \
    static constexpr int kSubBlock = SUB_BLOCK; /* elements sharing one scale */  \
  };

DUET_BLOCK_TRAITS(BlockQ4_0, DType::kQ4_0, kQK, false, kQK)
DUET_BLOCK_TRAITS(BlockQ4_1, DType::kQ4_1, kQK, true, kQK)
DUET_BLOCK_TRAITS(BlockQ5_0, DType::kQ5_0, kQK, false, kQK)
DUET_BLOCK_TRAITS(BlockQ5_1, DType::kQ5_1, kQK, true, kQK)
DUET_BLOCK_TRAITS(BlockQ8_0, DType::kQ8_0, kQK, false, kQK)
DUET_BLOCK_TRAITS(BlockIQ4_NL, DType::kIQ4_NL, kQK, false, kQK)
DUET_BLOCK_TRAITS(BlockQ2_K, DType::kQ2_K, kQK_K, true, 16)
DUET_BLOCK_TRAITS(BlockQ3_K, DType::kQ3_K, kQK_K, false, 16)
DUET_BLOCK_TRAITS(BlockQ4_K, DType::kQ4_K, kQK_K, true, 32)
DUET_BLOCK_TRAITS(BlockQ5_K, DType::kQ5_K, kQK_K, true, 32)
DUET_BLOCK_TRAITS(BlockQ6_K, DType::kQ6_K, kQK_K, false, 16)
DUET_BLOCK_TRAITS(BlockQ8_K, DType::kQ8_K, kQK_K, false, 16)
#undef DUET_BLOCK_TRAITS

// Bytes and elements of one block of T: kBlockBytes<DType::kQ8_0> is 34.
template <DType T>
inline constexpr int kBlockBytes = static_cast<int>(sizeof(typename BlockOf<T>::type));
template <DType T>
inline constexpr int kBlockElements = BlockTraits<typename BlockOf<T>::type>::kElements;

// Calls f(BlockTraits<B>{}) for the block type of `type` and returns true, or
// returns false for a type that is not block-quantized (f32, f16, bf16, i32).
template <typename F>
constexpr bool visit_block_type(DType type, F&& f) {
  switch (type) {
    case DType::kQ4_0:
      f(BlockTraits<BlockQ4_0>{});
      return true;
    case DType::kQ4_1:
      f(BlockTraits<BlockQ4_1>{});
      return true;
    case DType::kQ5_0:
      f(BlockTraits<BlockQ5_0>{});
      return true;
    case DType::kQ5_1:
      f(BlockTraits<BlockQ5_1>{});
      return true;
    case DType::kQ8_0:
      f(BlockTraits<BlockQ8_0>{});
      return true;
    case DType::kIQ4_NL:
      f(BlockTraits<BlockIQ4_NL>{});
      return true;
    case DType::kQ2_K:
      f(BlockTraits<BlockQ2_K>{});
      return true;
    case DType::kQ3_K:
      f(BlockTraits<BlockQ3_K>{});
      return true;
    case DType::kQ4_K:
      f(BlockTraits<BlockQ4_K>{});
      return true;
    case DType::kQ5_K:
      f(BlockTraits<BlockQ5_K>{});
      return true;
    case DType::kQ6_K:
      f(BlockTraits<BlockQ6_K>{});
      return true;
    case DType::kQ8_K:
      f(BlockTraits<BlockQ8_K>{});
      return true;
    default:
      return false;
  }
}

// ---- unpacking: the integer quant of element j (0 <= j < kElements) --------

DUET_BLOCK_FN int nibble(const uint8_t* qs, int j) {  // j in 0..31 of a 32-block
  return j < kQK / 2 ? (qs[j] & 15) : (qs[j - kQK / 2] >> 4);
}
DUET_BLOCK_FN uint32_t le32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

DUET_BLOCK_FN int q4_0_quant(const BlockQ4_0& b, int j) { return nibble(b.qs, j) - 8; }
DUET_BLOCK_FN int q4_1_quant(const BlockQ4_1& b, int j) { return nibble(b.qs, j); }
DUET_BLOCK_FN int q5_0_quant(const BlockQ5_0& b, int j) {
  return (nibble(b.qs, j) | static_cast<int>((le32(b.qh) >> j) & 1) << 4) - 16;
}
DUET_BLOCK_FN int q5_1_quant(const BlockQ5_1& b, int j) {
  return nibble(b.qs, j) | static_cast<int>((le32(b.qh) >> j) & 1) << 4;
}
// iq4_nl's 16 levels, ascending (ggml's kvalues_iq4nl): level q, 0 <= q < 16.
// Levels 0-7 and 8-15 are the bytes of two 64-bit words, lowest first, so
// that the lookup stays in registers (a GPU thread would keep an array
// indexed at run time in local memory): -127 -104 -83 -65 -49 -35 -22 -10,
// then 1 13 25 38 53 69 89 113.
DUET_BLOCK_FN constexpr int iq4_nl_level(int q) {
  constexpr uint64_t kLow = 0xF6EADDCFBFAD9881u, kHigh = 0x7159453526190D01u;
  return static_cast<int8_t>(static_cast<uint8_t>((q < 8 ? kLow : kHigh) >> (8 * (q & 7))));
}
// The same as a table, for host code that looks levels up in bulk.
inline constexpr std::array<int8_t, 16> kIQ4NLLevels = [] {
  std::array<int8_t, 16> levels{};
  for (int q = 0; q < 16; ++q)
    levels[static_cast<size_t>(q)] = static_cast<int8_t>(iq4_nl_level(q));
  return levels;
}();
// The level of element j.
DUET_BLOCK_FN int iq4_nl_quant(const BlockIQ4_NL& b, int j) {
  return iq4_nl_level(nibble(b.qs, j));
}

// q2_k and q3_k: element j = 128 h + 32 r + l (h half, r 2-bit plane, l < 32)
// keeps its 2 low bits at bits 2 r of qs[32 h + l]. Its sub-block, as in
// every format with sub-blocks of 16, is j / 16.
DUET_BLOCK_FN int k_plane_bits(const uint8_t* qs, int j) {
  const int h = j / 128, r = (j % 128) / 32, l = j % 32;
  return (qs[32 * h + l] >> (2 * r)) & 3;
}

DUET_BLOCK_FN int q2_k_quant(const BlockQ2_K& b, int j) { return k_plane_bits(b.qs, j); }
// The 4-bit scale and 4-bit min of sub-block s (0..15).
DUET_BLOCK_FN int q2_k_scale(const BlockQ2_K& b, int s) { return b.scales[s] & 15; }
DUET_BLOCK_FN int q2_k_min(const BlockQ2_K& b, int s) { return b.scales[s] >> 4; }

// 2 low bits, minus 4 where bit 4 h + r of hmask[l] is clear.
DUET_BLOCK_FN int q3_k_quant(const BlockQ3_K& b, int j) {
  const int h = j / 128, r = (j % 128) / 32, l = j % 32;
  const bool high = (b.hmask[l] >> (4 * h + r)) & 1;
  return k_plane_bits(b.qs, j) - (high ? 0 : 4);
}
// The 6-bit scale of sub-block s (0..15), 0..63 (the format subtracts 32):
// low nibbles in scales[0..7] (s < 8 low, s >= 8 high nibble of
// scales[s % 8]), the two high bits in scales[8 + s % 4] at bits 2 (s / 4).
DUET_BLOCK_FN int q3_k_scale(const BlockQ3_K& b, int s) {
  const int low = (b.scales[s % 8] >> (4 * (s / 8))) & 15;
  const int high = (b.scales[8 + s % 4] >> (2 * (s / 4))) & 3;
  return low | high << 4;
}

// q4_k and q5_k: the 6-bit scale and min of sub-block s (0..7).
DUET_BLOCK_FN void k4_scale_min(const uint8_t* scales, int s, int& sc, int& m) {
  if (s < 4) {
    sc = scales[s] & 63;
    m = scales[s + 4] & 63;
  } else {
    sc = (scales[s + 4] & 15) | ((scales[s - 4] >> 6) << 4);
    m = (scales[s + 4] >> 4) | ((scales[s] >> 6) << 4);
  }
}
// Element j = 64 c + 32 n + l (c chunk, n nibble, l < 32): nibble n of
// qs[32 c + l]; sub-block 2 c + n = j / 32.
DUET_BLOCK_FN int k4_nibble(const uint8_t* qs, int j) {
  const int c = j / 64, n = (j % 64) / 32, l = j % 32;
  return (qs[32 * c + l] >> (4 * n)) & 15;
}
DUET_BLOCK_FN int q4_k_quant(const BlockQ4_K& b, int j) { return k4_nibble(b.qs, j); }
// The fifth bit of element j is bit j / 32 of qh[j % 32].
DUET_BLOCK_FN int q5_k_quant(const BlockQ5_K& b, int j) {
  return k4_nibble(b.qs, j) | ((b.qh[j % 32] >> (j / 32)) & 1) << 4;
}

// q6_k: element j = 128 h + 32 r + l: low 4 bits are nibble r / 2 of
// ql[64 h + 32 (r % 2) + l], high 2 bits are bits 2 r of qh[32 h + l];
// sub-block j / 16. Returns q - 32, in -32..31.
DUET_BLOCK_FN int q6_k_quant(const BlockQ6_K& b, int j) {
  const int h = j / 128, r = (j % 128) / 32, l = j % 32;
  const int low = (b.ql[64 * h + 32 * (r % 2) + l] >> (4 * (r / 2))) & 15;
  const int high = (b.qh[32 * h + l] >> (2 * r)) & 3;
  return (low | high << 4) - 32;
}

}  // namespace duet::blocks
