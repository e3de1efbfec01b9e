// kernel_test_data.h — random ggml weight matrices and activations, and the
// double-precision products the onednn kernels' tests (qgemv_test,
// row_tiles_test, row_tiles_amx_test) measure against.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "duet/dtype.h"
#include "duet/quant.h"
#include "kernels/cpu_features.h"

namespace duet::onednn::testing {

// Every CPU path this machine runs, scalar first.
inline std::vector<CpuPath> runnable_paths() {
  std::vector<CpuPath> paths;
  for (CpuPath p : {CpuPath::kScalar, CpuPath::kAvx2, CpuPath::kAvx512, CpuPath::kAvx512Vnni}) {
    if (p <= hardware_cpu_path()) paths.push_back(p);
  }
  return paths;
}

// ---- a weight matrix in ggml blocks ----------------------------------------------

struct Matrix {
  DType type;
  int64_t rows;
  int64_t k;
  int64_t row_bytes;
  std::vector<uint8_t> bytes;

  // Row r as f32, through core's dequantizer.
  std::vector<float> row(int64_t r) const {
    std::vector<float> out(static_cast<size_t>(k));
    dequantize_row(type, bytes.data() + r * row_bytes, out.data(), k);
    return out;
  }
};

inline void put_f16(uint8_t* p, float v) {
  const uint16_t h = f32_to_f16(v);
  std::memcpy(p, &h, sizeof h);
}

// Random weights. Quantized blocks get random quant bytes (every nibble and
// every int8, -128 included) and scales of either sign, as ggml files have
// (q4_0's d is negative whenever a block's largest magnitude is negative).
// With `exact`, scales are powers of two and minimums small multiples of one,
// and f32/f16 values are multiples of 2^-7 in [-1, 1].
inline Matrix random_matrix(DType type, int64_t rows, int64_t k, uint32_t seed,
                            bool exact = false) {
  Matrix m{
      type, rows, k, static_cast<int64_t>(*dtype_row_bytes(type, static_cast<uint64_t>(k))), {}};
  m.bytes.resize(static_cast<size_t>(rows * m.row_bytes));
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  auto scale = [&] {
    if (exact) return std::ldexp(byte(rng) % 2 != 0 ? 1.0f : -1.0f, -4 - byte(rng) % 3);
    return uni(rng) * 0.05f;
  };
  auto minimum = [&] {
    if (exact) return std::ldexp(static_cast<float>(byte(rng) % 17 - 8), -6);
    return uni(rng) * 0.4f;
  };
  auto value = [&] {
    return exact ? std::ldexp(static_cast<float>(byte(rng) - 128), -7) : uni(rng);
  };
  const int64_t n = rows * k;
  uint8_t* p = m.bytes.data();
  switch (type) {
    case DType::kF32:
      for (int64_t i = 0; i < n; ++i, p += 4) {
        const float v = value();
        std::memcpy(p, &v, sizeof v);
      }
      break;
    case DType::kF16:
      for (int64_t i = 0; i < n; ++i, p += 2) put_f16(p, value());
      break;
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K: {
      // Random bytes, then the f16 fields: d (and m or dmin) at the front,
      // q6_k's d at the back.
      const int64_t block_bytes = dtype_traits(type).block_bytes;
      for (int64_t b = 0; b < n / dtype_traits(type).block_size; ++b, p += block_bytes) {
        for (int64_t i = 0; i < block_bytes; ++i) p[i] = static_cast<uint8_t>(byte(rng));
        if (type == DType::kQ6_K) {
          // Exact products need small sub-block scales: |q - 32| * 4 keeps
          // each block's terms within float's 24 bits.
          if (exact) {
            for (int64_t i = 192; i < 208; ++i) p[i] = static_cast<uint8_t>(byte(rng) % 9 - 4);
          }
          put_f16(p + block_bytes - 2, scale());
          continue;
        }
        put_f16(p, scale());
        if (type == DType::kQ5_1) put_f16(p + 2, minimum());
        if (type == DType::kQ4_K || type == DType::kQ5_K) put_f16(p + 2, scale());
      }
      break;
    }
    case DType::kQ2_K:
    case DType::kQ3_K: {
      // Random bytes, then the f16 fields at the back: q2_k's d and dmin,
      // q3_k's d.
      const int64_t block_bytes = dtype_traits(type).block_bytes;
      for (int64_t b = 0; b < n / dtype_traits(type).block_size; ++b, p += block_bytes) {
        for (int64_t i = 0; i < block_bytes; ++i) p[i] = static_cast<uint8_t>(byte(rng));
        if (type == DType::kQ2_K) {
          put_f16(p + block_bytes - 4, scale());
          put_f16(p + block_bytes - 2, exact ? std::ldexp(1.0f, -6) : std::fabs(scale()));
        } else {
          put_f16(p + block_bytes - 2, scale());
        }
      }
      break;
    }
    default: {
      const int64_t qs_offset = type == DType::kQ4_1 ? 4 : 2;
      const int64_t block_bytes = dtype_traits(type).block_bytes;
      for (int64_t b = 0; b < n / 32; ++b, p += block_bytes) {
        put_f16(p, scale());
        if (type == DType::kQ4_1) put_f16(p + 2, minimum());
        for (int64_t i = qs_offset; i < block_bytes; ++i) p[i] = static_cast<uint8_t>(byte(rng));
      }
    }
  }
  return m;
}

// Activations uniform in [-1, 1]. With `exact`, each block is q * 2^-7 for
// integers q with max |q| = 127, so quantization reproduces it exactly.
inline std::vector<float> random_activations(int64_t k, uint32_t seed, bool exact = false) {
  std::mt19937 rng(seed);
  std::vector<float> x(static_cast<size_t>(k));
  if (!exact) {
    std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
    for (float& v : x) v = uni(rng);
    return x;
  }
  std::uniform_int_distribution<int> q(-127, 127);
  for (int64_t i = 0; i < k; ++i) {
    x[i] = std::ldexp(static_cast<float>(i % 32 == 5 ? (i % 64 < 32 ? 127 : -127) : q(rng)), -7);
  }
  return x;
}

inline std::vector<double> reference_product(const Matrix& m, const std::vector<float>& x) {
  std::vector<double> y(static_cast<size_t>(m.rows));
  for (int64_t r = 0; r < m.rows; ++r) {
    const std::vector<float> w = m.row(r);
    double acc = 0.0;
    for (int64_t c = 0; c < m.k; ++c) acc += static_cast<double>(w[c]) * x[c];
    y[r] = acc;
  }
  return y;
}

// ‖y − ref‖ / ‖ref‖.
inline double normalized_error(const std::vector<float>& y, const std::vector<double>& ref) {
  double err = 0.0, norm = 0.0;
  for (size_t i = 0; i < y.size(); ++i) {
    err += (y[i] - ref[i]) * (y[i] - ref[i]);
    norm += ref[i] * ref[i];
  }
  return std::sqrt(err / norm);
}

// The row-tile tests' cases: a weight type and a k, every tile format with
// one to 64 blocks (the nibble formats with 1, 2 and 3: fewer than the AMX
// kernel unpacks ahead), the K-quants with one super-block and more.
inline std::vector<std::tuple<DType, int64_t>> row_tile_cases() {
  return {{DType::kQ4_0, 96},  {DType::kQ4_0, 32},  {DType::kIQ4_NL, 64}, {DType::kQ4_1, 96},
          {DType::kQ4_1, 576}, {DType::kQ5_0, 160}, {DType::kQ5_1, 64},   {DType::kQ8_0, 576},
          {DType::kQ8_0, 32},  {DType::kQ4_K, 512}, {DType::kQ4_K, 256},  {DType::kQ4_K, 1536},
          {DType::kQ5_K, 256}, {DType::kQ2_K, 256}, {DType::kQ3_K, 512},  {DType::kQ6_K, 512},
          {DType::kQ6_K, 256}, {DType::kIQ4_NL, 96}};
}

// A test name for a row_tile_cases() entry: "q4_k_k512".
inline std::string type_and_k_name(std::tuple<DType, int64_t> c) {
  return std::string(dtype_name(std::get<0>(c))) + "_k" + std::to_string(std::get<1>(c));
}

}  // namespace duet::onednn::testing
