// gemv kernels for the 5-bit formats, iq4_nl and the K-quants (q5_0, q5_1,
// iq4_nl, q2_k, q3_k, q4_k, q5_k, q6_k), written once and compiled once per CpuPath with that
// path's instruction flags (kernels/CMakeLists.txt): unpacking and the byte dot products of 32
// elements have AVX2 forms (vpmaddubsw, or vpdpbusd where AVX-512 VNNI is on) beside the portable
// ones the scalar build keeps; every form computes the same integers. The same unpacking expands
// the formats to f32 for GEMM panels, value for value as duet::dequantize_row does.
// DUET_KQUANT_ENTRY names the gemv entry point being built and
// DUET_KQUANT_EXPAND_ENTRY, where given, the expansion's (the VNNI build,
// whose expansion would be the AVX-512 one, has none).
//
// Every format is reckoned 32 elements at a time, one activation block of
// Q8Activations: the weights' integer levels are unpacked to 32 bytes, their
// dot products with the activation terms formed in integers, and the block
// adds, as qgemv.h's formulas,
//   u * dw * Σ(qw*qx) + mw * s
// with dw, mw the block's scale and offset: q5_0 (d, -16d), q5_1 (d, m),
// iq4_nl (d, none: its levels are signed, from its table),
// q4_k and q5_k (d*sc, -dmin*m of the 32-element sub-block); the 16-element
// sub-blocks of q6_k and q3_k each add u * d*sc * Σ((q-bias)*qx) over their
// half (bias 32 and 4), and q2_k's u * d*sc * Σ(q*qx) - dmin*m * s_half, with
// s_half the half's activation sum (Q8Activations::half_scales).
// The AVX2 builds take a K-quant super-block (or eight q5 blocks) per step,
// with the scales of all its blocks as one vector, keep 8 lanes of integer
// sums per block scaled as floats (one horizontal sum per row), and prefetch
// ahead in each thread's stream of rows; the portable build takes one block
// at a time. Each row is summed in one fixed order, so the results do not
// depend on how rows are shared among threads or which vectors share a call.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "duet/block_formats.h"
#include "duet/quant.h"
#include "kernels/prefetch.h"
#include "kernels/qgemv_paths.h"

#if !defined(DUET_KQUANT_ENTRY)
#error "DUET_KQUANT_ENTRY must name the gemv entry point (kernels/CMakeLists.txt)"
#endif

namespace duet::onednn::detail {
namespace {

namespace blk = duet::blocks;
constexpr int kBlock = blk::kQK;

float load_f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof h);
#if defined(__F16C__)
  return _cvtsh_ss(h);
#else
  return f16_to_f32(h);
#endif
}

// One activation block's worth of weight levels, unsigned: ≤ 63 for the
// formats whose dot products use them, iq4_nl's level + 128 for its
// expansion and portable rows.
struct alignas(32) Levels {
  uint8_t v[kBlock];
};

#if defined(__AVX2__)
__m256i load32(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
void store(Levels& w, __m256i v) { _mm256_store_si256(reinterpret_cast<__m256i*>(w.v), v); }
__m256i bytes(int v) { return _mm256_set1_epi8(static_cast<char>(v)); }

// Per 32-bit lane i: Σ w[4i..4i+3] * x[4i..4i+3], w unsigned (≤ 63), x signed.
__m256i dot_lanes(__m256i w, __m256i x) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), w, x);
#else
  // Pairs stay below 2 * 63 * 127 < 2^15: vpmaddubsw does not saturate.
  return _mm256_madd_epi16(_mm256_maddubs_epi16(w, x), _mm256_set1_epi16(1));
#endif
}
float sum_lanes(__m256 v) {
  __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  h = _mm_add_ss(h, _mm_movehdup_ps(h));
  return _mm_cvtss_f32(h);
}
#endif

// A row's running sum, block by block (the portable rows, and the q5 rows'
// last blocks short of eight). Each activation block adds
//   scale_lo * Σ_{j<16} (w[j] - bias) * x[j] + scale_hi * Σ_{j≥16} (...) + offset
// over all terms of xq (x = 256*q + q_lo with two), where the scales carry the
// block's unit u: dw*u for every format, per half for q6_k's two sub-blocks.
// The AVX2 form keeps 8 lanes of 4-element integer sums (exact in float:
// below 2^23 even with two terms) and scales them as floats, so a block costs
// no horizontal sum; the lanes are summed once per row.
class RowSum {
 public:
  void add(const Levels& w, const Q8Activations& xq, int64_t b, int bias, float scale_lo,
           float scale_hi, float offset) {
#if defined(__AVX2__)
    const __m256i wv = _mm256_load_si256(reinterpret_cast<const __m256i*>(w.v));
    __m256i lanes = term(wv, xq.q() + b * kBlock, bias);
    if (xq.terms() == 2) {
      lanes = _mm256_add_epi32(_mm256_slli_epi32(lanes, 8), term(wv, xq.q_lo() + b * kBlock, bias));
    }
    const __m256 scale = _mm256_set_m128(_mm_set1_ps(scale_hi), _mm_set1_ps(scale_lo));
    // Alternating accumulators, and the offsets apart from both: no block's
    // additions wait on the previous block's.
    lanes_[n_ % 2] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(lanes), scale, lanes_[n_ % 2]);
    offsets_[n_ % 8] += offset;
    ++n_;
#else
    int32_t lo = half(w.v, xq.q() + b * kBlock, bias);
    int32_t hi = half(w.v + 16, xq.q() + b * kBlock + 16, bias);
    if (xq.terms() == 2) {
      lo = 256 * lo + half(w.v, xq.q_lo() + b * kBlock, bias);
      hi = 256 * hi + half(w.v + 16, xq.q_lo() + b * kBlock + 16, bias);
    }
    sum_ += scale_lo * static_cast<float>(lo) + scale_hi * static_cast<float>(hi);
    sum_ += offset;
#endif
  }

  float total() const {
#if defined(__AVX2__)
    return sum_lanes(_mm256_add_ps(lanes_[0], lanes_[1])) + sum_lanes(_mm256_loadu_ps(offsets_));
#else
    return sum_;
#endif
  }

 private:
#if defined(__AVX2__)
  static __m256i term(__m256i w, const int8_t* x, int bias) {
    const __m256i xv = load32(x);
    const __m256i d = dot_lanes(w, xv);
    return bias == 0 ? d : _mm256_sub_epi32(d, dot_lanes(bytes(bias), xv));
  }
  __m256 lanes_[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  float offsets_[8] = {};
  int64_t n_ = 0;
#else
  static int32_t half(const uint8_t* w, const int8_t* x, int bias) {
    int32_t sum = 0;
    for (int j = 0; j < 16; ++j) sum += (static_cast<int32_t>(w[j]) - bias) * x[j];
    return sum;
  }
  float sum_ = 0.0f;
#endif
};

// ---- unpacking ---------------------------------------------------------------

#if defined(__AVX2__)
// iq4_nl: the 32 signed levels of a block, each nibble (laid out as q4_0's)
// looked up in kIQ4NLLevels.
__m256i levels_iq4_nl(const uint8_t* qs) {
  const __m128i table = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk::kIQ4NLLevels.data()));
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i low4 = _mm_set1_epi8(15);
  const __m128i lo = _mm_shuffle_epi8(table, _mm_and_si128(q, low4));
  const __m128i hi = _mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16(q, 4), low4));
  return _mm256_set_m128i(hi, lo);
}

// dot_lanes of signed weights: |w| times x with w's sign. With |w| ≤ 127 and
// |x| ≤ 127 (every activation term) vpmaddubsw's pairs stay below 2^15.
__m256i dot_signed(__m256i w, __m256i x) {
  return dot_lanes(_mm256_abs_epi8(w), _mm256_sign_epi8(x, w));
}
#endif

// (For the expansion and the portable rows.) iq4_nl's levels plus 128
// (1..241), the 128 applied as a bias.
[[maybe_unused]] void unpack_iq4_nl(const uint8_t* qs, Levels& w) {
#if defined(__AVX2__)
  store(w, _mm256_xor_si256(levels_iq4_nl(qs), bytes(0x80)));
#else
  for (int j = 0; j < kBlock / 2; ++j) {
    w.v[j] = static_cast<uint8_t>(blk::iq4_nl_level(qs[j] & 15) + 128);
    w.v[j + kBlock / 2] = static_cast<uint8_t>(blk::iq4_nl_level(qs[j] >> 4) + 128);
  }
#endif
}

// q5_0 / q5_1: qs[j] holds elements j (low nibble) and j + 16; bit j of the
// 32-bit qh is element j's fifth bit.
#if defined(__AVX2__)
__m256i levels_q5(const uint8_t* qs, const uint8_t* qh_bytes) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, sizeof qh);
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i lo = _mm_and_si128(q, _mm_set1_epi8(15));
  const __m128i hi = _mm_and_si128(_mm_srli_epi16(q, 4), _mm_set1_epi8(15));
  // Byte j of `spread` is byte j / 8 of qh; the mask picks bit j % 8.
  const __m256i spread =
      _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(qh)),
                          _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2,
                                           2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ULL));
  const __m256i fifth =
      _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit), bytes(16));
  return _mm256_or_si256(_mm256_set_m128i(hi, lo), fifth);
}
#endif

void unpack_q5(const uint8_t* qs, const uint8_t* qh_bytes, Levels& w) {
#if defined(__AVX2__)
  store(w, levels_q5(qs, qh_bytes));
#else
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, sizeof qh);
  for (int j = 0; j < kBlock / 2; ++j) {
    w.v[j] = static_cast<uint8_t>((qs[j] & 15) | ((qh >> j) & 1) << 4);
    w.v[j + kBlock / 2] = static_cast<uint8_t>((qs[j] >> 4) | ((qh >> (j + kBlock / 2)) & 1) << 4);
  }
#endif
}

// (The next two serve the expansion and the portable rows, which the VNNI
// build, whose AVX2 rows unpack in registers and which has no expansion,
// leaves unused.)
// q4_k / q5_k sub-block s: nibble s % 2 of the 32 bytes q, and for q5_k
// bit s of each byte of qh as the fifth bit.
[[maybe_unused]] void unpack_k4(const uint8_t* q, const uint8_t* qh, int s, Levels& w) {
#if defined(__AVX2__)
  __m256i v = load32(q);
  if (s % 2 == 1) v = _mm256_srli_epi16(v, 4);
  v = _mm256_and_si256(v, bytes(15));
  if (qh != nullptr) {
    // Shifting 16-bit lanes right by s leaves bit s of each byte at bit 0.
    const __m256i h = _mm256_and_si256(_mm256_srli_epi16(load32(qh), s), bytes(1));
    v = _mm256_or_si256(v, _mm256_slli_epi16(h, 4));
  }
  store(w, v);
#else
  const int shift = 4 * (s % 2);
  for (int j = 0; j < kBlock; ++j) {
    int level = (q[j] >> shift) & 15;
    if (qh != nullptr) level |= ((qh[j] >> s) & 1) << 4;
    w.v[j] = static_cast<uint8_t>(level);
  }
#endif
}

// q6_k activation block a = 4h + r (elements 128h + 32r + l): low nibble r / 2
// of ql (from 64h + 32(r % 2)), two high bits 2r of qh (from 32h); levels
// 0..63, the format's -32 applied as RowSum's bias.
[[maybe_unused]] void unpack_q6(const uint8_t* ql, const uint8_t* qh, int r, Levels& w) {
#if defined(__AVX2__)
  __m256i low = load32(ql);
  if (r >= 2) low = _mm256_srli_epi16(low, 4);
  low = _mm256_and_si256(low, bytes(15));
  const __m256i high = _mm256_and_si256(_mm256_srli_epi16(load32(qh), 2 * r), bytes(3));
  store(w, _mm256_or_si256(low, _mm256_slli_epi16(high, 4)));
#else
  for (int l = 0; l < kBlock; ++l) {
    const int low = (ql[l] >> (4 * (r / 2))) & 15;
    const int high = (qh[l] >> (2 * r)) & 3;
    w.v[l] = static_cast<uint8_t>(low | high << 4);
  }
#endif
}

// q2_k / q3_k activation block a = 4h + r (elements 128h + 32r + l): bits 2r
// of the 32 bytes qs (from 32h), and for q3_k bit a of each byte of hmask as
// bit 2: levels 0..7, the format's -4 (where that bit is clear) applied as
// RowSum's bias.
[[maybe_unused]] void unpack_k2(const uint8_t* qs, const uint8_t* hmask, int a, Levels& w) {
  const int r = a % 4;
#if defined(__AVX2__)
  // Shifting 16-bit lanes keeps each byte's own bits at the bottom.
  __m256i v = _mm256_and_si256(_mm256_srli_epi16(load32(qs), 2 * r), bytes(3));
  if (hmask != nullptr) {
    const __m256i h = _mm256_and_si256(_mm256_srli_epi16(load32(hmask), a), bytes(1));
    v = _mm256_or_si256(v, _mm256_slli_epi16(h, 2));
  }
  store(w, v);
#else
  for (int l = 0; l < kBlock; ++l) {
    int level = (qs[l] >> (2 * r)) & 3;
    if (hmask != nullptr) level |= ((hmask[l] >> a) & 1) << 2;
    w.v[l] = static_cast<uint8_t>(level);
  }
#endif
}

// ---- rows ---------------------------------------------------------------------

#if defined(__AVX2__)
// The units u and sums s of the eight activation blocks from `us`, where
// Q8Activations::scales() interleaves them (u0, s0, u1, s1, ...).
void split_units(const float* us, __m256& u, __m256& s) {
  const __m256 a = _mm256_loadu_ps(us), c = _mm256_loadu_ps(us + 8);
  u = _mm256_castpd_ps(
      _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, c, 0x88)), 0xd8));
  s = _mm256_castpd_ps(
      _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, c, 0xdd)), 0xd8));
}

// q5_0 and q5_1 eight blocks at a time: their f16 scales (and minimums)
// converted together and multiplied by the activation blocks' units and
// sums as vectors; each block adds its 8 lanes of integer sums scaled by its
// lane. A row's last blocks short of eight go through row_q5's RowSum.
template <class Block>
float row_q5_avx2(const uint8_t* row, const Q8Activations& xq) {
  constexpr bool kMin = std::is_same_v<Block, blk::BlockQ5_1>;
  constexpr int64_t kBytes = sizeof(Block);
  const int64_t nb = xq.blocks();
  const bool two = xq.terms() == 2;
  __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  __m256 acc_off = _mm256_setzero_ps();
  int64_t b = 0;
  for (; b + 8 <= nb; b += 8) {
    const uint8_t* p = row + b * kBytes;
    prefetch_stream(p, 8 * kBytes);
    alignas(16) uint16_t dh[8];
    alignas(16) uint16_t mh[8] = {};
    for (int i = 0; i < 8; ++i) {
      std::memcpy(&dh[i], p + i * kBytes + offsetof(Block, d), sizeof(uint16_t));
      if constexpr (kMin)
        std::memcpy(&mh[i], p + i * kBytes + offsetof(Block, m), sizeof(uint16_t));
    }
    const __m256 d = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(dh)));
    __m256 u, sum;
    split_units(xq.scales() + 2 * b, u, sum);
    // q5_0: d*(q - 16) = d*q + (-16d); q5_1: d*q + m.
    const __m256 m = kMin ? _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(mh)))
                          : _mm256_mul_ps(_mm256_set1_ps(-16.0f), d);
    acc_off = _mm256_fmadd_ps(m, sum, acc_off);
    const __m256 scale = _mm256_mul_ps(d, u);
    for (int i = 0; i < 8; ++i) {
      const uint8_t* blk_i = p + i * kBytes;
      const __m256i w = levels_q5(blk_i + offsetof(Block, qs), blk_i + offsetof(Block, qh));
      __m256i lanes = dot_lanes(w, load32(xq.q() + (b + i) * kBlock));
      if (two) {
        lanes = _mm256_add_epi32(_mm256_slli_epi32(lanes, 8),
                                 dot_lanes(w, load32(xq.q_lo() + (b + i) * kBlock)));
      }
      acc[i % 2] =
          _mm256_fmadd_ps(_mm256_cvtepi32_ps(lanes),
                          _mm256_permutevar8x32_ps(scale, _mm256_set1_epi32(i)), acc[i % 2]);
    }
  }
  RowSum tail;
  Levels w;
  for (; b < nb; ++b) {
    const uint8_t* p = row + b * kBytes;
    unpack_q5(p + offsetof(Block, qs), p + offsetof(Block, qh), w);
    const float d = load_f16(p + offsetof(Block, d));
    float m = -16.0f * d;
    if constexpr (kMin) m = load_f16(p + offsetof(Block, m));
    const float scale = d * xq.scales()[2 * b];
    tail.add(w, xq, b, 0, scale, scale, m * xq.scales()[2 * b + 1]);
  }
  return sum_lanes(_mm256_add_ps(acc[0], acc[1])) + sum_lanes(acc_off) + tail.total();
}
#endif

#if !defined(__AVX2__)
template <class Block>
float row_q5(const uint8_t* row, const Q8Activations& xq) {
  const float* sx = xq.scales();
  RowSum acc;
  Levels w;
  for (int64_t b = 0; b < xq.blocks(); ++b) {
    const uint8_t* p = row + b * static_cast<int64_t>(sizeof(Block));
    unpack_q5(p + offsetof(Block, qs), p + offsetof(Block, qh), w);
    const float d = load_f16(p + offsetof(Block, d));
    float m = -16.0f * d;  // q5_0: d*(q - 16) = d*q + (-16d)
    if constexpr (std::is_same_v<Block, blk::BlockQ5_1>) m = load_f16(p + offsetof(Block, m));
    const float scale = d * sx[2 * b];
    acc.add(w, xq, b, 0, scale, scale, m * sx[2 * b + 1]);
  }
  return acc.total();
}
#endif

#if defined(__AVX2__)
// iq4_nl eight blocks at a time, as row_q5_avx2: the f16 scales converted
// together and multiplied by the activation blocks' units as a vector; the
// signed levels' magnitudes multiply the activations with the levels' signs
// (dot_signed), so the integer sums are exact and the same on every path. A
// row's last blocks short of eight go one at a time.
float row_iq4_nl_avx2(const uint8_t* row, const Q8Activations& xq) {
  using Block = blk::BlockIQ4_NL;
  constexpr int64_t kBytes = sizeof(Block);
  const int64_t nb = xq.blocks();
  const bool two = xq.terms() == 2;
  // Block b's 8 lanes of integer sums.
  auto block_lanes = [&](const uint8_t* p, int64_t b) {
    const __m256i levels = levels_iq4_nl(p + offsetof(Block, qs));
    auto term = [&](const int8_t* x) { return dot_signed(levels, load32(x + b * kBlock)); };
    __m256i lanes = term(xq.q());
    if (two) lanes = _mm256_add_epi32(_mm256_slli_epi32(lanes, 8), term(xq.q_lo()));
    return lanes;
  };
  __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};  // independent chains
  int64_t b = 0;
  for (; b + 8 <= nb; b += 8) {
    const uint8_t* p = row + b * kBytes;
    prefetch_stream(p, 8 * kBytes);
    alignas(16) uint16_t dh[8];
    for (int i = 0; i < 8; ++i) {
      std::memcpy(&dh[i], p + i * kBytes + offsetof(Block, d), sizeof(uint16_t));
    }
    const __m256 d = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(dh)));
    __m256 u, unused_sums;
    split_units(xq.scales() + 2 * b, u, unused_sums);
    const __m256 scale = _mm256_mul_ps(d, u);
    for (int i = 0; i < 8; ++i) {
      acc[i % 2] =
          _mm256_fmadd_ps(_mm256_cvtepi32_ps(block_lanes(p + i * kBytes, b + i)),
                          _mm256_permutevar8x32_ps(scale, _mm256_set1_epi32(i)), acc[i % 2]);
    }
  }
  for (; b < nb; ++b) {
    const uint8_t* p = row + b * kBytes;
    const float scale = load_f16(p + offsetof(Block, d)) * xq.scales()[2 * b];
    acc[0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(block_lanes(p, b)), _mm256_set1_ps(scale), acc[0]);
  }
  return sum_lanes(_mm256_add_ps(acc[0], acc[1]));
}
#else
float row_iq4_nl(const uint8_t* row, const Q8Activations& xq) {
  using Block = blk::BlockIQ4_NL;
  RowSum acc;
  Levels w;
  for (int64_t b = 0; b < xq.blocks(); ++b) {
    const uint8_t* p = row + b * static_cast<int64_t>(sizeof(Block));
    unpack_iq4_nl(p + offsetof(Block, qs), w);
    const float scale = load_f16(p + offsetof(Block, d)) * xq.scales()[2 * b];
    acc.add(w, xq, b, 128, scale, scale, 0.0f);
  }
  return acc.total();
}
#endif

#if !defined(__AVX2__)
// The portable forms; the AVX2 builds use row_k4_avx2 and row_q6_k_avx2.
// q4_k and q5_k: eight 32-element sub-blocks per super-block, each one
// activation block.
template <class Block>
float row_k4(const uint8_t* row, const Q8Activations& xq) {
  constexpr bool kFive = std::is_same_v<Block, blk::BlockQ5_K>;
  constexpr int kSubs = blk::kQK_K / kBlock;
  const float* sx = xq.scales();
  const int64_t supers = xq.k() / blk::kQK_K;
  RowSum acc;
  Levels w;
  for (int64_t sb = 0; sb < supers; ++sb) {
    const uint8_t* p = row + sb * static_cast<int64_t>(sizeof(Block));
    const float d = load_f16(p + offsetof(Block, d));
    const float dmin = load_f16(p + offsetof(Block, dmin));
    const uint8_t* scales = p + offsetof(Block, scales);
    const uint8_t* qs = p + offsetof(Block, qs);
    const uint8_t* qh = nullptr;
    if constexpr (kFive) qh = p + offsetof(Block, qh);
    for (int s = 0; s < kSubs; ++s) {
      unpack_k4(qs + kBlock * (s / 2), qh, s, w);
      int sc = 0, m = 0;
      blk::k4_scale_min(scales, s, sc, m);
      const int64_t b = sb * kSubs + s;
      const float scale = (d * static_cast<float>(sc)) * sx[2 * b];
      acc.add(w, xq, b, 0, scale, scale, (-dmin * static_cast<float>(m)) * sx[2 * b + 1]);
    }
  }
  return acc.total();
}

#endif

#if defined(__AVX2__)
// q4_k and q5_k a super-block at a time, in registers: the eight 6-bit scales
// and minimums are unpacked together and turned into one vector each of
// d*sc*u and dmin*m*s (u, s: each activation block's unit and sum); each pair
// of sub-blocks (the low and high nibbles of 32 bytes) adds its 8-lane
// integer sums scaled by its lane of the first, and the minimums are one
// multiply-add per super-block.
template <class Block>
float row_k4_avx2(const uint8_t* row, const Q8Activations& xq) {
  constexpr bool kFive = std::is_same_v<Block, blk::BlockQ5_K>;
  const int64_t supers = xq.k() / blk::kQK_K;
  const bool two = xq.terms() == 2;
  const __m256i low4 = bytes(15);
  __m256 acc = _mm256_setzero_ps();
  __m256 acc2 = _mm256_setzero_ps();
  __m256 acc_min = _mm256_setzero_ps();
  for (int64_t sb = 0; sb < supers; ++sb) {
    const uint8_t* p = row + sb * static_cast<int64_t>(sizeof(Block));
    const int64_t b0 = sb * (blk::kQK_K / kBlock);
    prefetch_stream(p, sizeof(Block));
    // k4_scale_min for all eight sub-blocks: 32-bit words of the 12 bytes.
    uint32_t w[3];
    std::memcpy(w, p + offsetof(Block, scales), sizeof w);
    const uint32_t sc_lo = w[0] & 0x3f3f3f3fu;
    const uint32_t m_lo = w[1] & 0x3f3f3f3fu;
    const uint32_t sc_hi = (w[2] & 0x0f0f0f0fu) | ((w[0] >> 6) & 0x03030303u) << 4;
    const uint32_t m_hi = ((w[2] >> 4) & 0x0f0f0f0fu) | ((w[1] >> 6) & 0x03030303u) << 4;
    const __m256 sc = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(
        _mm_set_epi32(0, 0, static_cast<int>(sc_hi), static_cast<int>(sc_lo))));
    const __m256 mn = _mm256_cvtepi32_ps(
        _mm256_cvtepu8_epi32(_mm_set_epi32(0, 0, static_cast<int>(m_hi), static_cast<int>(m_lo))));
    __m256 u, sum;
    split_units(xq.scales() + 2 * b0, u, sum);
    const __m256 scale =
        _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(load_f16(p + offsetof(Block, d))), sc), u);
    acc_min = _mm256_fmadd_ps(
        _mm256_mul_ps(_mm256_set1_ps(load_f16(p + offsetof(Block, dmin))), mn), sum, acc_min);
    const uint8_t* qs = p + offsetof(Block, qs);
    __m256i high = _mm256_setzero_si256();
    if constexpr (kFive) high = load32(p + offsetof(Block, qh));
    for (int pair = 0; pair < 4; ++pair) {
      const __m256i q = load32(qs + kBlock * pair);
      __m256i lv = _mm256_and_si256(q, low4);
      __m256i hv = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
      if constexpr (kFive) {
        // Bits 2*pair and 2*pair + 1 of each qh byte: the fifth bits.
        lv = _mm256_or_si256(
            lv,
            _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(high, 2 * pair), bytes(1)), 4));
        hv = _mm256_or_si256(
            hv, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(high, 2 * pair + 1), bytes(1)),
                                  4));
      }
      const int64_t b = b0 + 2 * pair;
      __m256i dl = dot_lanes(lv, load32(xq.q() + b * kBlock));
      __m256i dh = dot_lanes(hv, load32(xq.q() + (b + 1) * kBlock));
      if (two) {
        dl = _mm256_add_epi32(_mm256_slli_epi32(dl, 8),
                              dot_lanes(lv, load32(xq.q_lo() + b * kBlock)));
        dh = _mm256_add_epi32(_mm256_slli_epi32(dh, 8),
                              dot_lanes(hv, load32(xq.q_lo() + (b + 1) * kBlock)));
      }
      // Two accumulators: the multiply-adds of a row do not wait on each other.
      acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dl),
                            _mm256_permutevar8x32_ps(scale, _mm256_set1_epi32(2 * pair)), acc);
      acc2 =
          _mm256_fmadd_ps(_mm256_cvtepi32_ps(dh),
                          _mm256_permutevar8x32_ps(scale, _mm256_set1_epi32(2 * pair + 1)), acc2);
    }
  }
  return sum_lanes(_mm256_add_ps(acc, acc2)) - sum_lanes(acc_min);
}
#endif

#if defined(__AVX2__)
// q6_k a super-block at a time, in registers: for activation block a (the
// elements 32a..32a+31), lanes 0-3 hold sub-block 2a's integer sums and
// lanes 4-7 sub-block 2a+1's, scaled by d*u*sc of their sub-block.
float row_q6_k_avx2(const uint8_t* row, const Q8Activations& xq) {
  using Block = blk::BlockQ6_K;
  const int64_t supers = xq.k() / blk::kQK_K;
  const bool two = xq.terms() == 2;
  const __m256i low4 = bytes(15), low2 = bytes(3), bias = bytes(32);
  __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};  // independent chains
  for (int64_t sb = 0; sb < supers; ++sb) {
    const uint8_t* p = row + sb * static_cast<int64_t>(sizeof(Block));
    const int64_t b0 = sb * (blk::kQK_K / kBlock);
    prefetch_stream(p, sizeof(Block));
    const __m128i sc8 =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + offsetof(Block, scales)));
    const __m256 sc_first = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc8));
    const __m256 sc_second = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(sc8, 8)));
    __m256 u, unused_sums;
    split_units(xq.scales() + 2 * b0, u, unused_sums);
    const __m256 du = _mm256_mul_ps(_mm256_set1_ps(load_f16(p + offsetof(Block, d))), u);
    for (int h = 0; h < 2; ++h) {
      const __m256i ql0 = load32(p + offsetof(Block, ql) + 64 * h);
      const __m256i ql1 = load32(p + offsetof(Block, ql) + 64 * h + 32);
      const __m256i qh = load32(p + offsetof(Block, qh) + 32 * h);
      for (int r = 0; r < 4; ++r) {
        const __m256i lowv = _mm256_and_si256(
            r < 2 ? (r == 0 ? ql0 : ql1) : _mm256_srli_epi16(r == 2 ? ql0 : ql1, 4), low4);
        const __m256i highv = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * r), low2);
        const __m256i w = _mm256_or_si256(lowv, _mm256_slli_epi16(highv, 4));
        const int a = 4 * h + r;
        const int64_t b = b0 + a;
        const __m256i x = load32(xq.q() + b * kBlock);
        __m256i d = _mm256_sub_epi32(dot_lanes(w, x), dot_lanes(bias, x));
        if (two) {
          const __m256i xl = load32(xq.q_lo() + b * kBlock);
          d = _mm256_add_epi32(_mm256_slli_epi32(d, 8),
                               _mm256_sub_epi32(dot_lanes(w, xl), dot_lanes(bias, xl)));
        }
        const int j = 2 * (a % 4);
        const __m256i pick = _mm256_setr_epi32(j, j, j, j, j + 1, j + 1, j + 1, j + 1);
        const __m256 sc = _mm256_permutevar8x32_ps(a < 4 ? sc_first : sc_second, pick);
        const __m256 scale = _mm256_mul_ps(_mm256_permutevar8x32_ps(du, _mm256_set1_epi32(a)), sc);
        acc[r % 2] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), scale, acc[r % 2]);
      }
    }
  }
  return sum_lanes(_mm256_add_ps(acc[0], acc[1]));
}
#endif

#if !defined(__AVX2__)
float row_q6_k(const uint8_t* row, const Q8Activations& xq) {
  using Block = blk::BlockQ6_K;
  constexpr int kSubs = blk::kQK_K / kBlock;
  const float* sx = xq.scales();
  const int64_t supers = xq.k() / blk::kQK_K;
  RowSum acc;
  Levels w;
  for (int64_t sb = 0; sb < supers; ++sb) {
    const uint8_t* p = row + sb * static_cast<int64_t>(sizeof(Block));
    const float d = load_f16(p + offsetof(Block, d));
    const auto* scales = reinterpret_cast<const int8_t*>(p + offsetof(Block, scales));
    for (int a = 0; a < kSubs; ++a) {
      const int h = a / 4, r = a % 4;
      unpack_q6(p + offsetof(Block, ql) + 64 * h + 32 * (r % 2), p + offsetof(Block, qh) + 32 * h,
                r, w);
      const int64_t b = sb * kSubs + a;
      const float du = d * sx[2 * b];
      acc.add(w, xq, b, 32, du * static_cast<float>(scales[2 * a]),
              du * static_cast<float>(scales[2 * a + 1]), 0.0f);
    }
  }
  return acc.total();
}

// q2_k: each activation block's two sub-blocks add their scaled integer sums
// and their minimums against the half blocks' activation sums.
float row_q2_k(const uint8_t* row, const Q8Activations& xq) {
  using Block = blk::BlockQ2_K;
  constexpr int kSubs = blk::kQK_K / kBlock;
  const float* sx = xq.scales();
  const float* hs = xq.half_scales();
  const int64_t supers = xq.k() / blk::kQK_K;
  RowSum acc;
  Levels w;
  for (int64_t sb = 0; sb < supers; ++sb) {
    const uint8_t* p = row + sb * static_cast<int64_t>(sizeof(Block));
    const auto& x = *reinterpret_cast<const Block*>(p);
    const float d = load_f16(p + offsetof(Block, d));
    const float dmin = load_f16(p + offsetof(Block, dmin));
    for (int a = 0; a < kSubs; ++a) {
      unpack_k2(p + offsetof(Block, qs) + 32 * (a / 4), nullptr, a, w);
      const int64_t b = sb * kSubs + a;
      const float du = d * sx[2 * b];
      const float offset = -(dmin * static_cast<float>(blk::q2_k_min(x, 2 * a))) * hs[2 * b] -
                           (dmin * static_cast<float>(blk::q2_k_min(x, 2 * a + 1))) * hs[2 * b + 1];
      acc.add(w, xq, b, 0, du * static_cast<float>(blk::q2_k_scale(x, 2 * a)),
              du * static_cast<float>(blk::q2_k_scale(x, 2 * a + 1)), offset);
    }
  }
  return acc.total();
}

float row_q3_k(const uint8_t* row, const Q8Activations& xq) {
  using Block = blk::BlockQ3_K;
  constexpr int kSubs = blk::kQK_K / kBlock;
  const float* sx = xq.scales();
  const int64_t supers = xq.k() / blk::kQK_K;
  RowSum acc;
  Levels w;
  for (int64_t sb = 0; sb < supers; ++sb) {
    const uint8_t* p = row + sb * static_cast<int64_t>(sizeof(Block));
    const auto& x = *reinterpret_cast<const Block*>(p);
    const float d = load_f16(p + offsetof(Block, d));
    for (int a = 0; a < kSubs; ++a) {
      unpack_k2(p + offsetof(Block, qs) + 32 * (a / 4), p + offsetof(Block, hmask), a, w);
      const int64_t b = sb * kSubs + a;
      const float du = d * sx[2 * b];
      acc.add(w, xq, b, 4, du * static_cast<float>(blk::q3_k_scale(x, 2 * a) - 32),
              du * static_cast<float>(blk::q3_k_scale(x, 2 * a + 1) - 32), 0.0f);
    }
  }
  return acc.total();
}
#endif

#if defined(__AVX2__)
// q2_k and q3_k a super-block at a time, in registers: activation block a's
// lanes 0-3 hold sub-block 2a's integer sums of levels times activations,
// lanes 4-7 sub-block 2a+1's, scaled by that sub-block's d*u*sc, which is
// computed for all sixteen sub-blocks once per super-block. The levels are
// unsigned; what the format subtracts from them (q2_k's minimum dmin*m,
// q3_k's 4 where the hmask bit is clear: levels 0..7 less 4) is subtracted
// once per super-block, as two multiply-adds against the half blocks'
// activation sums.
template <class Block>
float row_k2_avx2(const uint8_t* row, const Q8Activations& xq) {
  constexpr bool kThree = std::is_same_v<Block, blk::BlockQ3_K>;
  const int64_t supers = xq.k() / blk::kQK_K;
  const bool two = xq.terms() == 2;
  const __m256i low2 = bytes(3);
  __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};  // independent chains
  __m256 acc_sub = _mm256_setzero_ps();
  // Eight bytes (as the low half of a vector) to eight floats.
  auto floats = [](uint64_t v) {
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<int64_t>(v))));
  };
  constexpr uint64_t kLow4 = 0x0f0f0f0f0f0f0f0fULL;
  for (int64_t sb = 0; sb < supers; ++sb) {
    const uint8_t* p = row + sb * static_cast<int64_t>(sizeof(Block));
    const int64_t b0 = sb * (blk::kQK_K / kBlock);
    prefetch_stream(p, sizeof(Block));
    const float* hs = xq.half_scales() + 2 * b0;  // one per sub-block
    const __m256 d = _mm256_set1_ps(load_f16(p + offsetof(Block, d)));
    __m256 sc_first, sc_second;  // the scales of sub-blocks 0-7 and 8-15
    __m256i hmask = _mm256_setzero_si256();
    if constexpr (kThree) {
      // q3_k_scale for all sixteen: low nibbles of bytes 0-7 (sub-blocks
      // 0-7) and their high nibbles (8-15); two high bits each from bytes
      // 8-11, at bits 2 (s / 4) of byte 8 + s % 4.
      uint64_t low;
      uint32_t high;
      std::memcpy(&low, p + offsetof(Block, scales), sizeof low);
      std::memcpy(&high, p + offsetof(Block, scales) + 8, sizeof high);
      auto pair = [&](int shift) {  // the high bits of s % 4 = 0..3, one shift
        return static_cast<uint64_t>((high >> shift) & 0x03030303u);
      };
      const uint64_t first = (low & kLow4) | (pair(0) | pair(2) << 32) << 4;
      const uint64_t second = ((low >> 4) & kLow4) | (pair(4) | pair(6) << 32) << 4;
      const __m256 offset = _mm256_set1_ps(32.0f);
      sc_first = _mm256_sub_ps(floats(first), offset);
      sc_second = _mm256_sub_ps(floats(second), offset);
      hmask = load32(p + offsetof(Block, hmask));
      // Σ 4*d*sc * s_half: the 4 the format takes from every level.
      const __m256 four_d = _mm256_mul_ps(_mm256_set1_ps(4.0f), d);
      acc_sub = _mm256_fmadd_ps(_mm256_mul_ps(four_d, sc_first), _mm256_loadu_ps(hs), acc_sub);
      acc_sub = _mm256_fmadd_ps(_mm256_mul_ps(four_d, sc_second), _mm256_loadu_ps(hs + 8), acc_sub);
    } else {
      uint64_t lo, hi;
      std::memcpy(&lo, p + offsetof(Block, scales), sizeof lo);
      std::memcpy(&hi, p + offsetof(Block, scales) + 8, sizeof hi);
      sc_first = floats(lo & kLow4);
      sc_second = floats(hi & kLow4);
      const __m256 dmin = _mm256_set1_ps(load_f16(p + offsetof(Block, dmin)));
      acc_sub = _mm256_fmadd_ps(_mm256_mul_ps(dmin, floats((lo >> 4) & kLow4)), _mm256_loadu_ps(hs),
                                acc_sub);
      acc_sub = _mm256_fmadd_ps(_mm256_mul_ps(dmin, floats((hi >> 4) & kLow4)),
                                _mm256_loadu_ps(hs + 8), acc_sub);
    }
    // d*u per sub-block (u of its activation block), times its scale.
    __m256 u, unused_sums;
    split_units(xq.scales() + 2 * b0, u, unused_sums);
    const __m256 du = _mm256_mul_ps(d, u);
    const __m256 scale_first = _mm256_mul_ps(
        _mm256_permutevar8x32_ps(du, _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3)), sc_first);
    const __m256 scale_second = _mm256_mul_ps(
        _mm256_permutevar8x32_ps(du, _mm256_setr_epi32(4, 4, 5, 5, 6, 6, 7, 7)), sc_second);
    for (int h = 0; h < 2; ++h) {
      const __m256i qs = load32(p + offsetof(Block, qs) + 32 * h);
      const __m256 scale_h = h == 0 ? scale_first : scale_second;
      for (int r = 0; r < 4; ++r) {
        const int a = 4 * h + r;
        __m256i w = _mm256_and_si256(_mm256_srli_epi16(qs, 2 * r), low2);
        if constexpr (kThree) {
          const __m256i top = _mm256_and_si256(_mm256_srli_epi16(hmask, a), bytes(1));
          w = _mm256_or_si256(w, _mm256_slli_epi16(top, 2));
        }
        const int64_t b = b0 + a;
        __m256i dot = dot_lanes(w, load32(xq.q() + b * kBlock));
        if (two) {
          dot = _mm256_add_epi32(_mm256_slli_epi32(dot, 8),
                                 dot_lanes(w, load32(xq.q_lo() + b * kBlock)));
        }
        const __m256i pick = _mm256_setr_epi32(2 * r, 2 * r, 2 * r, 2 * r, 2 * r + 1, 2 * r + 1,
                                               2 * r + 1, 2 * r + 1);
        acc[r % 2] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot),
                                     _mm256_permutevar8x32_ps(scale_h, pick), acc[r % 2]);
      }
    }
  }
  return sum_lanes(_mm256_add_ps(acc[0], acc[1])) - sum_lanes(acc_sub);
}
#endif

float row(DType t, const uint8_t* w, const Q8Activations& xq) {
  switch (t) {
#if defined(__AVX2__)
    case DType::kQ5_0:
      return row_q5_avx2<blk::BlockQ5_0>(w, xq);
    case DType::kQ5_1:
      return row_q5_avx2<blk::BlockQ5_1>(w, xq);
    case DType::kIQ4_NL:
      return row_iq4_nl_avx2(w, xq);
    case DType::kQ4_K:
      return row_k4_avx2<blk::BlockQ4_K>(w, xq);
    case DType::kQ5_K:
      return row_k4_avx2<blk::BlockQ5_K>(w, xq);
    case DType::kQ2_K:
      return row_k2_avx2<blk::BlockQ2_K>(w, xq);
    case DType::kQ3_K:
      return row_k2_avx2<blk::BlockQ3_K>(w, xq);
    default:
      return row_q6_k_avx2(w, xq);
#else
    case DType::kQ5_0:
      return row_q5<blk::BlockQ5_0>(w, xq);
    case DType::kQ5_1:
      return row_q5<blk::BlockQ5_1>(w, xq);
    case DType::kIQ4_NL:
      return row_iq4_nl(w, xq);
    case DType::kQ4_K:
      return row_k4<blk::BlockQ4_K>(w, xq);
    case DType::kQ5_K:
      return row_k4<blk::BlockQ5_K>(w, xq);
    case DType::kQ2_K:
      return row_q2_k(w, xq);
    case DType::kQ3_K:
      return row_q3_k(w, xq);
    default:
      return row_q6_k(w, xq);
#endif
  }
}

// ---- expansion to f32 (GEMM panels) ------------------------------------------
#if defined(DUET_KQUANT_EXPAND_ENTRY)

// y[i] = scale * (q[i] - bias) (+ offset) over 32 levels, scale and offset
// per half (the 16-element sub-blocks of q2_k, q3_k, q6_k), as
// duet::dequantize_row computes each value: one multiply, then one add, never
// fused (this file is built with -ffp-contract=off); formats without an
// offset add nothing, which keeps -0.
template <bool kOffset>
void expand32(const Levels& w, int bias, const float (&scale)[2], const float (&offset)[2],
              float* y) {
#if defined(__AVX2__)
  for (int i = 0; i < 4; ++i) {
    const __m128i q8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(w.v + 8 * i));
    const __m256 q =
        _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_cvtepu8_epi32(q8), _mm256_set1_epi32(bias)));
    __m256 v = _mm256_mul_ps(_mm256_set1_ps(scale[i / 2]), q);
    if constexpr (kOffset) v = _mm256_add_ps(v, _mm256_set1_ps(offset[i / 2]));
    _mm256_storeu_ps(y + 8 * i, v);
  }
#else
  for (int j = 0; j < kBlock; ++j) {
    y[j] = scale[j / 16] * static_cast<float>(w.v[j] - bias);
    if constexpr (kOffset) y[j] += offset[j / 16];
  }
#endif
}

template <class Block>
void expand_q5(const uint8_t* src, float* y, int64_t blocks) {
  Levels w;
  for (int64_t b = 0; b < blocks; ++b, y += kBlock) {
    const uint8_t* p = src + b * static_cast<int64_t>(sizeof(Block));
    unpack_q5(p + offsetof(Block, qs), p + offsetof(Block, qh), w);
    const float d = load_f16(p + offsetof(Block, d));
    if constexpr (std::is_same_v<Block, blk::BlockQ5_1>) {
      const float m = load_f16(p + offsetof(Block, m));
      expand32<true>(w, 0, {d, d}, {m, m}, y);
    } else {
      expand32<false>(w, 16, {d, d}, {0.0f, 0.0f}, y);
    }
  }
}

template <class Block>
void expand_k4(const uint8_t* src, float* y, int64_t supers) {
  Levels w;
  for (int64_t sb = 0; sb < supers; ++sb) {
    const uint8_t* p = src + sb * static_cast<int64_t>(sizeof(Block));
    const float d = load_f16(p + offsetof(Block, d));
    const float dmin = load_f16(p + offsetof(Block, dmin));
    const uint8_t* qh = nullptr;
    if constexpr (std::is_same_v<Block, blk::BlockQ5_K>) qh = p + offsetof(Block, qh);
    for (int s = 0; s < blk::kQK_K / kBlock; ++s, y += kBlock) {
      unpack_k4(p + offsetof(Block, qs) + kBlock * (s / 2), qh, s, w);
      int sc = 0, m = 0;
      blk::k4_scale_min(p + offsetof(Block, scales), s, sc, m);
      const float d1 = d * static_cast<float>(sc);
      const float m1 = -(dmin * static_cast<float>(m));  // d1*q - m1 as d1*q + (-m1)
      expand32<true>(w, 0, {d1, d1}, {m1, m1}, y);
    }
  }
}

void expand_q6_k(const uint8_t* src, float* y, int64_t supers) {
  using Block = blk::BlockQ6_K;
  Levels w;
  for (int64_t sb = 0; sb < supers; ++sb) {
    const uint8_t* p = src + sb * static_cast<int64_t>(sizeof(Block));
    const float d = load_f16(p + offsetof(Block, d));
    const auto* scales = reinterpret_cast<const int8_t*>(p + offsetof(Block, scales));
    for (int a = 0; a < blk::kQK_K / kBlock; ++a, y += kBlock) {
      const int h = a / 4, r = a % 4;
      unpack_q6(p + offsetof(Block, ql) + 64 * h + 32 * (r % 2), p + offsetof(Block, qh) + 32 * h,
                r, w);
      const float lo = d * static_cast<float>(scales[2 * a]);
      const float hi = d * static_cast<float>(scales[2 * a + 1]);
      expand32<false>(w, 32, {lo, hi}, {0.0f, 0.0f}, y);
    }
  }
}

void expand_iq4_nl(const uint8_t* src, float* y, int64_t blocks) {
  using Block = blk::BlockIQ4_NL;
  Levels w;
  for (int64_t b = 0; b < blocks; ++b, y += kBlock) {
    const uint8_t* p = src + b * static_cast<int64_t>(sizeof(Block));
    unpack_iq4_nl(p + offsetof(Block, qs), w);
    const float d = load_f16(p + offsetof(Block, d));
    expand32<false>(w, 128, {d, d}, {0.0f, 0.0f}, y);
  }
}

// q2_k: d*sc*q - dmin*m as d*sc*q + (-(dmin*m)); q3_k: d*(sc - 32)*(q - 4).
template <class Block>
void expand_k2(const uint8_t* src, float* y, int64_t supers) {
  constexpr bool kThree = std::is_same_v<Block, blk::BlockQ3_K>;
  Levels w;
  for (int64_t sb = 0; sb < supers; ++sb) {
    const uint8_t* p = src + sb * static_cast<int64_t>(sizeof(Block));
    const auto& x = *reinterpret_cast<const Block*>(p);
    const float d = load_f16(p + offsetof(Block, d));
    for (int a = 0; a < blk::kQK_K / kBlock; ++a, y += kBlock) {
      const uint8_t* qs = p + offsetof(Block, qs) + 32 * (a / 4);
      if constexpr (kThree) {
        unpack_k2(qs, p + offsetof(Block, hmask), a, w);
        const float lo = d * static_cast<float>(blk::q3_k_scale(x, 2 * a) - 32);
        const float hi = d * static_cast<float>(blk::q3_k_scale(x, 2 * a + 1) - 32);
        expand32<false>(w, 4, {lo, hi}, {0.0f, 0.0f}, y);
      } else {
        unpack_k2(qs, nullptr, a, w);
        const float dmin = load_f16(p + offsetof(Block, dmin));
        const float lo = d * static_cast<float>(blk::q2_k_scale(x, 2 * a));
        const float hi = d * static_cast<float>(blk::q2_k_scale(x, 2 * a + 1));
        const float m_lo = -(dmin * static_cast<float>(blk::q2_k_min(x, 2 * a)));
        const float m_hi = -(dmin * static_cast<float>(blk::q2_k_min(x, 2 * a + 1)));
        expand32<true>(w, 0, {lo, hi}, {m_lo, m_hi}, y);
      }
    }
  }
}
#endif

}  // namespace

#if defined(DUET_KQUANT_EXPAND_ENTRY)
void DUET_KQUANT_EXPAND_ENTRY(DType type, const void* src, float* dst, int64_t n) {
  const auto* p = static_cast<const uint8_t*>(src);
  switch (type) {
    case DType::kQ5_0:
      return expand_q5<blk::BlockQ5_0>(p, dst, n / kBlock);
    case DType::kQ5_1:
      return expand_q5<blk::BlockQ5_1>(p, dst, n / kBlock);
    case DType::kIQ4_NL:
      return expand_iq4_nl(p, dst, n / kBlock);
    case DType::kQ4_K:
      return expand_k4<blk::BlockQ4_K>(p, dst, n / blk::kQK_K);
    case DType::kQ5_K:
      return expand_k4<blk::BlockQ5_K>(p, dst, n / blk::kQK_K);
    case DType::kQ2_K:
      return expand_k2<blk::BlockQ2_K>(p, dst, n / blk::kQK_K);
    case DType::kQ3_K:
      return expand_k2<blk::BlockQ3_K>(p, dst, n / blk::kQK_K);
    default:
      return expand_q6_k(p, dst, n / blk::kQK_K);
  }
}
#endif

void DUET_KQUANT_ENTRY(const GemvArgs& a) {
  for (int64_t r = a.row_begin; r < a.row_end; ++r) {
    a.y[r] = row(a.wtype, a.w + r * a.row_bytes, *a.xq);
  }
}

}  // namespace duet::onednn::detail
