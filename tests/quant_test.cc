// Tests of duet/quant.h: f16/bf16 conversion against known bit patterns,
// dequantization of hand-built ggml blocks, and quantize -> dequantize round
// trips within each format's error bound.
#include "duet/quant.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "duet/app/gguf.h"
#include "duet/error.h"

namespace duet {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

float bits_to_f32(uint32_t bits) { return std::bit_cast<float>(bits); }

// ---- f16 --------------------------------------------------------------------

TEST(F16, ExactValuesHaveKnownBitPatterns) {
  struct Case {
    float value;
    uint16_t bits;
  };
  const Case cases[] = {
      {0.0f, 0x0000},
      {-0.0f, 0x8000},
      {1.0f, 0x3C00},
      {-2.0f, 0xC000},
      {0.5f, 0x3800},
      {65504.0f, 0x7BFF},         // largest finite
      {0x1p-14f, 0x0400},         // smallest normal
      {0x1p-24f, 0x0001},         // smallest subnormal
      {1023 * 0x1p-24f, 0x03FF},  // largest subnormal
      {kInf, 0x7C00},
      {-kInf, 0xFC00},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(f32_to_f16(c.value), c.bits) << c.value;
    EXPECT_EQ(std::bit_cast<uint32_t>(f16_to_f32(c.bits)), std::bit_cast<uint32_t>(c.value))
        << std::hex << c.bits;
  }
}

TEST(F16, RoundsToNearestTiesToEven) {
  // 1 + 2^-11 lies halfway between 0x3C00 and 0x3C01: the even 0x3C00 wins.
  EXPECT_EQ(f32_to_f16(1.0f + 0x1p-11f), 0x3C00);
  // 1 + 3 * 2^-11 lies halfway between 0x3C01 and 0x3C02: the even 0x3C02.
  EXPECT_EQ(f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3C02);
  // Just above a tie rounds up.
  EXPECT_EQ(f32_to_f16(std::nextafter(1.0f + 0x1p-11f, 2.0f)), 0x3C01);
  // 65519 is below the midpoint to the next (unrepresentable) step; 65520 is
  // the tie, and the even neighbour is infinity.
  EXPECT_EQ(f32_to_f16(65519.0f), 0x7BFF);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7C00);
  EXPECT_EQ(f32_to_f16(-1e6f), 0xFC00);
}

TEST(F16, RoundsIntoAndOutOfSubnormals) {
  EXPECT_EQ(f32_to_f16(0x1p-25f), 0x0000);                        // tie between 0 and 2^-24 -> 0
  EXPECT_EQ(f32_to_f16(std::nextafter(0x1p-25f, 1.0f)), 0x0001);  // above the tie
  EXPECT_EQ(f32_to_f16(3 * 0x1p-25f), 0x0002);                    // tie between 1 and 2 -> 2
  EXPECT_EQ(f32_to_f16(-0x1p-26f), 0x8000);                       // underflow keeps the sign
  EXPECT_EQ(f32_to_f16(1e-40f), 0x0000);                          // an f32 subnormal
  // The largest subnormal plus half a step rounds (to even) into the
  // smallest normal.
  EXPECT_EQ(f32_to_f16(1023.5f * 0x1p-24f), 0x0400);
}

TEST(F16, NanStaysNan) {
  const float nans[] = {std::numeric_limits<float>::quiet_NaN(), bits_to_f32(0x7F800001),
                        bits_to_f32(0xFFC00000)};
  for (float n : nans) {
    const uint16_t h = f32_to_f16(n);
    EXPECT_EQ(h & 0x7C00, 0x7C00) << std::hex << h;
    EXPECT_NE(h & 0x03FF, 0) << std::hex << h;
    EXPECT_TRUE(std::isnan(f16_to_f32(h)));
  }
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7E00)));
}

TEST(F16, EveryNonNanPatternRoundTrips) {
  for (uint32_t b = 0; b <= 0xFFFF; ++b) {
    const auto h = static_cast<uint16_t>(b);
    const float f = f16_to_f32(h);
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_f16(f), h) << std::hex << b;
  }
}

// ---- bf16 -------------------------------------------------------------------

TEST(BF16, KnownBitPatternsAndTies) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(f32_to_bf16(-2.0f), 0xC000);
  EXPECT_EQ(f32_to_bf16(kInf), 0x7F80);
  EXPECT_EQ(f32_to_bf16(bits_to_f32(0x3F808000)), 0x3F80);  // tie -> even
  EXPECT_EQ(f32_to_bf16(bits_to_f32(0x3F818000)), 0x3F82);  // tie -> even
  EXPECT_EQ(f32_to_bf16(bits_to_f32(0x3F808001)), 0x3F81);  // above the tie
  EXPECT_EQ(f32_to_bf16(bits_to_f32(0x7F7FFFFF)), 0x7F80);  // max float rounds to inf
  EXPECT_EQ(bf16_to_f32(0x3F80), 1.0f);
  EXPECT_EQ(bf16_to_f32(0xFF80), -kInf);
}

TEST(BF16, NanStaysNanAndEveryPatternRoundTrips) {
  // A payload only in the low 16 bits would truncate to infinity.
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(bits_to_f32(0x7F800001)))));
  for (uint32_t b = 0; b <= 0xFFFF; ++b) {
    const auto h = static_cast<uint16_t>(b);
    const float f = bf16_to_f32(h);
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_bf16(f), h) << std::hex << b;
  }
}

// ---- dequantizing hand-built blocks -----------------------------------------

void put_u16(std::vector<uint8_t>& out, uint16_t v) {
  out.push_back(static_cast<uint8_t>(v & 0xFF));  // ggml files are little-endian
  out.push_back(static_cast<uint8_t>(v >> 8));
}

std::vector<float> dequantize(DType type, const std::vector<uint8_t>& bytes, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  dequantize_row(type, bytes.data(), out.data(), n);
  return out;
}

TEST(Dequantize, Q4_0HandBuiltBlocks) {
  // Block 0: d = 0.5 (0x3800); qs[j] = j | (15 - j) << 4, so element j is
  // 0.5 * (j - 8) and element j + 16 is 0.5 * (7 - j).
  // Block 1: d = -2 (0xC000); every nibble 8 except qs[0] = 0x0F.
  std::vector<uint8_t> row;
  put_u16(row, 0x3800);
  for (int j = 0; j < 16; ++j) row.push_back(static_cast<uint8_t>(j | (15 - j) << 4));
  put_u16(row, 0xC000);
  row.push_back(0x8F);
  for (int j = 1; j < 16; ++j) row.push_back(0x88);

  const std::vector<float> y = dequantize(DType::kQ4_0, row, 64);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.5f * static_cast<float>(j - 8)) << j;
    EXPECT_EQ(y[j + 16], 0.5f * static_cast<float>(7 - j)) << j;
  }
  EXPECT_EQ(y[32], -14.0f);  // -2 * (15 - 8)
  for (int j = 33; j < 64; ++j) EXPECT_EQ(y[j], 0.0f) << j;
}

TEST(Dequantize, Q4_1HandBuiltBlock) {
  // d = 0.25 (0x3400), m = -1 (0xBC00): element j = 0.25 * j - 1 and
  // element j + 16 = 0.25 * (15 - j) - 1.
  std::vector<uint8_t> row;
  put_u16(row, 0x3400);
  put_u16(row, 0xBC00);
  for (int j = 0; j < 16; ++j) row.push_back(static_cast<uint8_t>(j | (15 - j) << 4));
  const std::vector<float> y = dequantize(DType::kQ4_1, row, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.25f * static_cast<float>(j) - 1.0f) << j;
    EXPECT_EQ(y[j + 16], 0.25f * static_cast<float>(15 - j) - 1.0f) << j;
  }
}

TEST(Dequantize, Q8_0HandBuiltBlock) {
  // d = 2 (0x4000); q runs -128, 127, then -15..14.
  std::vector<uint8_t> row;
  put_u16(row, 0x4000);
  std::vector<int> q = {-128, 127};
  for (int j = 2; j < 32; ++j) q.push_back(j - 17);
  for (int v : q) row.push_back(static_cast<uint8_t>(static_cast<int8_t>(v)));
  const std::vector<float> y = dequantize(DType::kQ8_0, row, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], 2.0f * static_cast<float>(q[j])) << j;
}

TEST(Dequantize, IQ4_NLHandBuiltBlock) {
  // d = 1 (0x3c00); byte j holds nibbles j (low: element j) and 15 - j
  // (high: element j + 16), so every level appears twice.
  std::vector<uint8_t> row;
  put_u16(row, 0x3c00);
  for (int j = 0; j < 16; ++j) row.push_back(static_cast<uint8_t>(j | (15 - j) << 4));
  const std::vector<float> y = dequantize(DType::kIQ4_NL, row, 32);
  // ggml's kvalues_iq4nl.
  const int levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], static_cast<float>(levels[j])) << j;
    EXPECT_EQ(y[j + 16], static_cast<float>(levels[15 - j])) << j + 16;
  }
}

TEST(Dequantize, ScalarTypes) {
  std::vector<uint8_t> f16;
  for (uint16_t h : std::initializer_list<uint16_t>{0x3C00, 0xC000, 0x0001, 0x7BFF})
    put_u16(f16, h);
  EXPECT_EQ(dequantize(DType::kF16, f16, 4), (std::vector<float>{1.0f, -2.0f, 0x1p-24f, 65504.0f}));

  std::vector<uint8_t> bf16;
  for (uint16_t h : std::initializer_list<uint16_t>{0x3F80, 0xC040}) put_u16(bf16, h);
  EXPECT_EQ(dequantize(DType::kBF16, bf16, 2), (std::vector<float>{1.0f, -3.0f}));

  const std::vector<float> f32 = {1.5f, -0.25f};
  std::vector<uint8_t> raw(sizeof(float) * 2);
  std::memcpy(raw.data(), f32.data(), raw.size());
  EXPECT_EQ(dequantize(DType::kF32, raw, 2), f32);
}

TEST(Dequantize, RejectsPartialBlocksAndNonFloatTypes) {
  std::vector<uint8_t> buf(64);
  std::vector<float> out(64);
  for (DType t :
       {DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1, DType::kQ8_0, DType::kIQ4_NL}) {
    try {
      dequantize_row(t, buf.data(), out.data(), 31);
      ADD_FAILURE() << "31 elements accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInternal);
      EXPECT_NE(std::string(e.what()).find("31"), std::string::npos) << e.what();
    }
    EXPECT_THROW(quantize_row(t, out.data(), buf.data(), 33), Error);
  }
  // A K-quant row is whole 256-element super-blocks: 32 elements are not.
  for (DType t : {DType::kQ2_K, DType::kQ3_K, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K}) {
    EXPECT_THROW(dequantize_row(t, buf.data(), out.data(), 32), Error) << dtype_name(t);
  }
  EXPECT_THROW(dequantize_row(DType::kI32, buf.data(), out.data(), 4), Error);
  EXPECT_THROW(quantize_row(DType::kI32, out.data(), buf.data(), 4), Error);
  // q8_k is read (an activation format), not written: a clear refusal.
  std::vector<uint8_t> super(static_cast<size_t>(dtype_traits(DType::kQ8_K).block_bytes));
  std::vector<float> x(256);
  EXPECT_THROW(quantize_row(DType::kQ8_K, x.data(), super.data(), 256), Error);
  // A K-quant row is written in whole super-blocks only.
  EXPECT_THROW(quantize_row(DType::kQ4_K, x.data(), super.data(), 128), Error);
}

// ---- quantizing --------------------------------------------------------------

std::vector<uint8_t> quantize(DType type, const std::vector<float>& x) {
  std::vector<uint8_t> out(*dtype_row_bytes(type, x.size()));
  quantize_row(type, x.data(), out.data(), static_cast<int64_t>(x.size()));
  return out;
}

uint16_t get_u16(const std::vector<uint8_t>& b, size_t at) {
  return static_cast<uint16_t>(b[at] | b[at + 1] << 8);
}

// ggml's own quantizers (libggml-base, through tests/kquant_vectors.py) on
// rows chosen to reach every branch of the K-quant searches, and on weights
// of SmolLM2: Duet must write the same bytes.
TEST(QuantizeK, EqualsGgmlOnRecordedVectors) {
  const GgufFile file =
      GgufFile::open(std::string(DUET_SOURCE_DIR) + "/tests/data/kquant_vectors.gguf");
  const GgufTensorInfo& floats = file.tensor("floats");
  const int64_t rows = floats.shape[0];
  const int64_t cols = floats.shape[1];
  int types = 0;
  for (DType t :
       {DType::kQ2_K, DType::kQ3_K, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kIQ4_NL}) {
    ++types;
    const GgufTensorInfo& want = file.tensor("ggml." + std::string(dtype_name(t)));
    ASSERT_EQ(want.dtype, t);
    const uint64_t row_bytes = *dtype_row_bytes(t, static_cast<uint64_t>(cols));
    std::vector<uint8_t> got(row_bytes);
    for (int64_t r = 0; r < rows; ++r) {
      quantize_row(t, static_cast<const float*>(floats.data()) + r * cols, got.data(), cols);
      const auto* expect = static_cast<const uint8_t*>(want.data()) + r * row_bytes;
      for (uint64_t i = 0; i < row_bytes; ++i) {
        ASSERT_EQ(got[i], expect[i])
            << dtype_name(t) << " row " << r << " super-block " << i / dtype_traits(t).block_bytes
            << " byte " << i % dtype_traits(t).block_bytes;
      }
    }
  }
  EXPECT_EQ(types, 6);
}

// More bits, less error: on Gaussian weights the relative RMS error of each
// K-quant stays below its bound (measured with this seed: q2_k 0.2961, q3_k
// 0.1506, q4_k 0.0711, q5_k 0.0361, q6_k 0.0177 of the RMS; q4_1's plain min/max fit per 32 gives
// 0.0780, so a q4_k search that stopped improving on it would fail) and
// above half of it (a quantizer that wrote nothing meaningful, or the
// floats themselves, would not land there).
TEST(QuantizeK, RoundTripErrorShrinksWithEachBit) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::vector<float> x(256 * 64);
  for (float& v : x) v = normal(rng);
  auto relative_rms_error = [&](DType t) {
    std::vector<float> back(x.size());
    dequantize_row(t, quantize(t, x).data(), back.data(), static_cast<int64_t>(x.size()));
    double err = 0.0, ref = 0.0;
    for (size_t i = 0; i < x.size(); ++i) {
      err += (back[i] - x[i]) * static_cast<double>(back[i] - x[i]);
      ref += x[i] * static_cast<double>(x[i]);
    }
    return std::sqrt(err / ref);
  };
  const double q2 = relative_rms_error(DType::kQ2_K);
  const double q3 = relative_rms_error(DType::kQ3_K);
  const double q4 = relative_rms_error(DType::kQ4_K);
  const double q5 = relative_rms_error(DType::kQ5_K);
  const double q6 = relative_rms_error(DType::kQ6_K);
  EXPECT_LT(q2, 0.31);
  EXPECT_LT(q3, 0.158);
  EXPECT_LT(q4, 0.075);
  EXPECT_LT(q5, 0.038);
  EXPECT_LT(q6, 0.019);
  EXPECT_GT(q2, 0.148);
  EXPECT_GT(q3, 0.075);
  EXPECT_GT(q4, 0.0355);
  EXPECT_GT(q5, 0.018);
  EXPECT_GT(q6, 0.0088);
}

TEST(Quantize, Q8_0MatchesGgmlRounding) {
  // amax = 16, so d = 16/127 and q = round(x * 127/16), halves away from 0.
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j - 16);
  const std::vector<uint8_t> b = quantize(DType::kQ8_0, x);
  EXPECT_EQ(get_u16(b, 0), f32_to_f16(16.0f / 127.0f));
  auto q = [&](int j) { return static_cast<int8_t>(b[2 + j]); };
  EXPECT_EQ(q(0), -127);
  EXPECT_EQ(q(13), -24);  // -3 * 7.9375 = -23.8125
  EXPECT_EQ(q(16), 0);
  EXPECT_EQ(q(20), 32);   // 4 * 7.9375 = 31.75
  EXPECT_EQ(q(31), 119);  // 15 * 7.9375 = 119.06
}

TEST(Quantize, Q4_0UsesTheSignedMaximumAndClampsTheOtherSide) {
  // The largest magnitude is -4, so d = -4 / -8 = 0.5 and -4 maps to q = 0.
  // +4 would need q = 16 and clamps to 15 (3.5).
  std::vector<float> x(32, 0.0f);
  x[0] = -4.0f;
  x[1] = 4.0f;
  x[2] = 1.0f;     // 2 + 8.5 -> q = 10 -> 1.0
  x[3] = 0.3f;     // 0.6 + 8.5 -> q = 9 -> 0.5
  x[17] = -0.26f;  // -0.52 + 8.5 -> q = 7 -> -0.5
  const std::vector<uint8_t> b = quantize(DType::kQ4_0, x);
  EXPECT_EQ(get_u16(b, 0), 0x3800);
  EXPECT_EQ(b[2 + 0] & 0x0F, 0);
  EXPECT_EQ(b[2 + 1] & 0x0F, 15);
  EXPECT_EQ(b[2 + 1] >> 4, 7);  // x[17]
  const std::vector<float> y = dequantize(DType::kQ4_0, b, 32);
  EXPECT_EQ(y[0], -4.0f);
  EXPECT_EQ(y[1], 3.5f);
  EXPECT_EQ(y[2], 1.0f);
  EXPECT_EQ(y[3], 0.5f);
  EXPECT_EQ(y[17], -0.5f);
  EXPECT_EQ(y[31], 0.0f);
}

TEST(Quantize, Q4_1StoresMinimumAndStep) {
  std::vector<float> x(32, 0.0f);
  x[0] = -1.0f;
  x[1] = 2.0f;
  x[2] = 0.15f;  // (0.15 + 1) / 0.2 + 0.5 = 6.25 -> q = 6
  const std::vector<uint8_t> b = quantize(DType::kQ4_1, x);
  const float d = f16_to_f32(get_u16(b, 0));
  const float m = f16_to_f32(get_u16(b, 2));
  EXPECT_EQ(get_u16(b, 0), f32_to_f16(3.0f / 15.0f));
  EXPECT_EQ(m, -1.0f);
  const std::vector<float> y = dequantize(DType::kQ4_1, b, 32);
  EXPECT_EQ(y[0], -1.0f);
  EXPECT_EQ(y[1], d * 15.0f + m);
  EXPECT_EQ(y[2], d * 6.0f + m);
}

TEST(Quantize, AllZeroBlocksStayZero) {
  const std::vector<float> zeros(64, 0.0f);
  for (DType t :
       {DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1, DType::kQ8_0, DType::kIQ4_NL}) {
    EXPECT_EQ(dequantize(t, quantize(t, zeros), 64), zeros) << dtype_name(t);
  }
}

// Random rows with features that stress each format: a wide spread, a block
// with one outlier, a constant block and a block of tiny values.
std::vector<float> test_row(uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(128);
  for (float& v : x) v = normal(rng);
  x[40] = 50.0f;                                 // block 1: outlier
  for (int j = 64; j < 96; ++j) x[j] = 0.75f;    // block 2: constant
  for (int j = 96; j < 128; ++j) x[j] *= 1e-3f;  // block 3: small
  return x;
}

// Round-trip error bounds, per block with exact scale d (before f16
// rounding) and stored scale d16 = f16(d); the extra terms cover that
// rounding and f32 arithmetic:
//   q8_0: d = amax/127;  |x - x'| <= d/2 + 127 |d - d16|
//   q4_0: d = v/-8;      |x - x'| <= |d|/2 + 8 |d - d16| where x/d < 7.5, and
//                        <= |d| + 8 |d - d16| on the clamped side (x/d in [7.5, 8])
//   q4_1: d = (max-min)/15;
//                        |x - x'| <= d/2 + 15 |d - d16| + |min - f16(min)|
TEST(Quantize, RoundTripsWithinTheFormatBound) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    const std::vector<float> x = test_row(seed);
    for (DType t : {DType::kQ4_0, DType::kQ4_1, DType::kQ8_0}) {
      const std::vector<float> y = dequantize(t, quantize(t, x), 128);
      for (size_t b = 0; b < 4; ++b) {
        const float* xb = x.data() + 32 * b;
        float lo = xb[0], hi = xb[0], vmax = 0.0f;
        for (int j = 0; j < 32; ++j) {
          lo = std::min(lo, xb[j]);
          hi = std::max(hi, xb[j]);
          if (std::fabs(xb[j]) > std::fabs(vmax)) vmax = xb[j];
        }
        for (int j = 0; j < 32; ++j) {
          double bound = 0.0;
          if (t == DType::kQ8_0) {
            const double d = std::fabs(vmax) / 127.0;
            bound = d / 2 + 127 * std::fabs(d - f16_to_f32(f32_to_f16(static_cast<float>(d))));
          } else if (t == DType::kQ4_0) {
            const double d = vmax / -8.0;
            const double d16 = f16_to_f32(f32_to_f16(static_cast<float>(d)));
            const double steps = d == 0 ? 0 : xb[j] / d;
            bound = (steps < 7.5 ? std::fabs(d) / 2 : std::fabs(d)) + 8 * std::fabs(d - d16);
          } else {
            const double d = (static_cast<double>(hi) - lo) / 15.0;
            const double d16 = f16_to_f32(f32_to_f16(static_cast<float>(d)));
            const double m16 = f16_to_f32(f32_to_f16(lo));
            bound = d / 2 + 15 * std::fabs(d - d16) + std::fabs(lo - m16);
          }
          bound += 1e-6 * std::fabs(vmax);  // f32 arithmetic in x / d and d * q
          EXPECT_LE(std::fabs(static_cast<double>(xb[j]) - y[32 * b + j]), bound)
              << dtype_name(t) << " seed " << seed << " block " << b << " element " << j
              << ": x = " << xb[j] << ", x' = " << y[32 * b + j];
        }
      }
    }
  }
}

TEST(Quantize, ScalarTypesRoundTripThroughTheirConversions) {
  const std::vector<float> x = test_row(7);
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16}) {
    const std::vector<float> y = dequantize(t, quantize(t, x), 128);
    for (size_t i = 0; i < x.size(); ++i) {
      const float want = t == DType::kF32   ? x[i]
                         : t == DType::kF16 ? f16_to_f32(f32_to_f16(x[i]))
                                            : bf16_to_f32(f32_to_bf16(x[i]));
      EXPECT_EQ(y[i], want) << dtype_name(t) << " element " << i;
    }
  }
}

// ---- against gguf-py -----------------------------------------------------------

// The file tests/quant_oracle.py writes (ctest fixture quant_oracle): random
// blocks of every type with gguf-py's dequantization of them, and random
// floats with gguf-py's quantization of them.
class QuantOracle : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::filesystem::path path = std::filesystem::path(DUET_BUILD_DIR) / "quant_oracle.gguf";
    ASSERT_TRUE(std::filesystem::exists(path))
        << path << " is missing: run ctest, whose fixture quant_oracle writes it";
    file_ = new GgufFile(GgufFile::open(path));
  }
  static void TearDownTestSuite() {
    delete file_;
    file_ = nullptr;
  }
  static const GgufFile& file() { return *file_; }

 private:
  static inline GgufFile* file_ = nullptr;
};

TEST_F(QuantOracle, DequantizationEqualsGgufPyBitForBit) {
  int types = 0;
  for (const GgufTensorInfo& blocks : file().tensors()) {
    if (!blocks.name.starts_with("blocks.")) continue;
    ++types;
    const std::string name(blocks.name.substr(7));
    ASSERT_TRUE(blocks.supported()) << name;
    const GgufTensorInfo& expect = file().tensor("expect." + name);
    ASSERT_EQ(expect.shape, blocks.shape) << name;
    const int64_t rows = blocks.shape[0];
    const int64_t cols = blocks.shape[1];
    const uint64_t row_bytes = *dtype_row_bytes(*blocks.dtype, static_cast<uint64_t>(cols));
    std::vector<float> got(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
      dequantize_row(*blocks.dtype, static_cast<const uint8_t*>(blocks.data()) + r * row_bytes,
                     got.data(), cols);
      const auto* want = static_cast<const float*>(expect.data()) + r * cols;
      for (int64_t c = 0; c < cols; ++c) {
        ASSERT_EQ(std::bit_cast<uint32_t>(got[static_cast<size_t>(c)]),
                  std::bit_cast<uint32_t>(want[c]))
            << name << " row " << r << " element " << c << ": Duet " << got[static_cast<size_t>(c)]
            << ", gguf-py " << want[c];
      }
    }
  }
  EXPECT_EQ(types, 11) << "q4_0 q4_1 q5_0 q5_1 q8_0 q2_k q3_k q4_k q5_k q6_k iq4_nl";
}

TEST_F(QuantOracle, QuantizationEqualsGgufPyByteForByte) {
  int types = 0;
  for (const GgufTensorInfo& floats : file().tensors()) {
    if (!floats.name.starts_with("floats.")) continue;
    ++types;
    const std::string name(floats.name.substr(7));
    const GgufTensorInfo& expect = file().tensor("quantized." + name);
    ASSERT_TRUE(expect.supported()) << name;
    const int64_t n = floats.shape[0] * floats.shape[1];
    std::vector<uint8_t> got(*dtype_row_bytes(*expect.dtype, static_cast<uint64_t>(n)));
    ASSERT_EQ(got.size(), expect.bytes) << name;
    quantize_row(*expect.dtype, static_cast<const float*>(floats.data()), got.data(), n);
    const auto* want = static_cast<const uint8_t*>(expect.data());
    const int64_t block_bytes = dtype_traits(*expect.dtype).block_bytes;
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i], want[i]) << name << " block " << static_cast<int64_t>(i) / block_bytes
                                 << " byte " << static_cast<int64_t>(i) % block_bytes;
    }
  }
  EXPECT_EQ(types, 5) << "q4_0 q4_1 q5_0 q5_1 q8_0";
}

}  // namespace
}  // namespace duet
