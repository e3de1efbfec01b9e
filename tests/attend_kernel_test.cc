// VectorKernels::attend and merge (backends/onednn/vector_kernels.h) on every
// CPU path this machine runs, against attention computed in double: shapes
// the model tests do not reach (groups of 1, 2, 5, 7 and 8 query heads per
// KV head, head_dim 16, 32, 96 and 128, position counts around the AVX-512
// kernel's blocks of 16), f32, f16 and q8_0 caches, and a cache read in two runs folded into
// one online-softmax state (q8_0 keys on the VNNI path are multiplied as
// int8: held to 1e-8, not 1e-10). Also VectorKernels::quantize_q8_0
// against duet::quantize_row, byte for byte.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "duet/quant.h"
#include "kernels/attend_avx512.h"
#include "kernels/cpu_features.h"
#include "random_floats.h"
#include "vector_kernels.h"

namespace duet::onednn {
namespace {

struct Shape {
  int32_t kv_heads;
  int32_t group;
  int32_t head_dim;
  int64_t n;
};

using testdata::random_floats;

// Rows of the cache are padded (stride > kv_heads * head_dim) as the slots of
// a real cache are not, so that reading past a head is caught by the values.
// The cache holds `type` (f32, f16 or q8_0) as duet::quantize_row stores it;
// the reference attends over what it holds.
void check(const Shape& s, DType type, CpuPath path) {
  const int64_t heads = int64_t{s.kv_heads} * s.group;
  const int64_t stride = int64_t{s.kv_heads} * s.head_dim + 32;  // elements
  const auto stride_bytes =
      static_cast<int64_t>(*dtype_row_bytes(type, static_cast<uint64_t>(stride)));
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
  const std::vector<float> q = random_floats(static_cast<size_t>(heads * s.head_dim), 1);
  std::vector<float> k = random_floats(static_cast<size_t>(s.n * stride), 2);
  std::vector<float> v = random_floats(static_cast<size_t>(s.n * stride), 3);
  std::vector<uint8_t> k_bytes(static_cast<size_t>(s.n * stride_bytes)), v_bytes(k_bytes.size());
  for (int64_t i = 0; i < s.n; ++i) {
    for (auto [x, bytes] :
         {std::pair{k.data(), k_bytes.data()}, std::pair{v.data(), v_bytes.data()}}) {
      quantize_row(type, x + i * stride, bytes + i * stride_bytes, stride);
      dequantize_row(type, bytes + i * stride_bytes, x + i * stride, stride);
    }
  }
  // Reference: softmax(scale * q·k) · v in double.
  std::vector<double> want(static_cast<size_t>(heads * s.head_dim));
  for (int64_t h = 0; h < heads; ++h) {
    const int64_t g = h / s.group;
    std::vector<double> w(static_cast<size_t>(s.n));
    double max = -INFINITY, total = 0.0;
    for (int64_t i = 0; i < s.n; ++i) {
      double dot = 0.0;
      for (int64_t d = 0; d < s.head_dim; ++d)
        dot += double{q[h * s.head_dim + d]} * k[i * stride + g * s.head_dim + d];
      w[i] = scale * dot;
      max = std::max(max, w[i]);
    }
    for (double& x : w) total += (x = std::exp(x - max));
    for (int64_t d = 0; d < s.head_dim; ++d) {
      double acc = 0.0;
      for (int64_t i = 0; i < s.n; ++i) acc += w[i] * v[i * stride + g * s.head_dim + d];
      want[h * s.head_dim + d] = acc / total;
    }
  }
  // The kernel, over two runs of positions [0, split) and [split, n).
  const VectorKernels& kernels = vector_kernels(path);
  std::vector<float> state(static_cast<size_t>(heads * (2 + s.head_dim)), 0.0f);
  const SoftmaxPart part{state.data(), state.data() + heads, state.data() + 2 * heads};
  std::fill(part.max, part.max + heads, -INFINITY);
  std::vector<float> scores(static_cast<size_t>(heads * (s.n + s.head_dim) + 16 * s.head_dim));
  const int64_t split = s.n / 3;
  for (auto [begin, end] : {std::pair<int64_t, int64_t>{0, split}, {split, s.n}}) {
    if (begin == end) continue;
    kernels.attend(q.data(), s.kv_heads, s.group, s.head_dim, scale,
                   k_bytes.data() + begin * stride_bytes, v_bytes.data() + begin * stride_bytes,
                   type, stride_bytes, end - begin, scores.data(), part);
  }
  std::vector<float> got(want.size());
  kernels.merge(&part, 1, static_cast<int32_t>(heads), s.head_dim, got.data());
  double err = 0.0, norm = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    err += (got[i] - want[i]) * (got[i] - want[i]);
    norm += want[i] * want[i];
  }
  // Where the VNNI path multiplies q8_0 keys as int8 (the queries in two
  // int8 terms, about 16 bits); everything else is f32 arithmetic.
  const bool int8_keys =
      detail::int8_scores(path == CpuPath::kAvx512Vnni, type, s.head_dim);
  EXPECT_LE(err / norm, int8_keys ? 1e-8 : 1e-10)
      << cpu_path_name(path) << " " << dtype_name(type) << " kv_heads " << s.kv_heads << " group "
      << s.group << " head_dim " << s.head_dim << " n " << s.n;
}

TEST(AttendKernel, MatchesDoubleAttentionOnEveryPath) {
  const Shape shapes[] = {{1, 1, 16, 1},   {2, 3, 64, 15},  {2, 3, 64, 16},  {3, 3, 64, 17},
                          {1, 5, 64, 100}, {2, 8, 128, 33}, {1, 4, 128, 64}, {3, 1, 32, 300},
                          {2, 2, 96, 40},  {1, 7, 96, 33}};
  for (CpuPath path : {CpuPath::kScalar, CpuPath::kAvx2, CpuPath::kAvx512, CpuPath::kAvx512Vnni}) {
    if (path > hardware_cpu_path()) continue;
    for (const Shape& s : shapes) {
      for (DType type : {DType::kF32, DType::kF16, DType::kQ8_0}) {
        if (type == DType::kQ8_0 && s.head_dim % 32 != 0) continue;  // blocks would span heads
        check(s, type, path);
      }
    }
  }
}

// The cache's q8_0 rows are stored by the kernel but must be the bytes core
// writes (the reference backend's cache, exported caches, GGUF files).
TEST(QuantizeQ8Kernel, StoresTheBytesOfQuantizeRow) {
  std::vector<float> x = random_floats(32 * 64, 4);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] *= std::ldexp(1.0f, static_cast<int>(i / 32 % 40) - 20);
  // Block 1: d = 1 exactly, so x * (1 / d) lands on ties; block 2: zeros;
  // block 3: one large outlier; block 4: ties of the other sign too.
  for (int j = 0; j < 32; ++j) {
    x[32 + j] = j == 0 ? 127.0f : static_cast<float>(j) - 15.5f;
    x[64 + j] = 0.0f;
    x[96 + j] = j == 7 ? -3.0e4f : 0.01f * static_cast<float>(j);
    x[128 + j] = j == 0 ? -127.0f : 0.5f + static_cast<float>(j % 5) * (j % 2 ? -1.0f : 1.0f);
  }
  std::vector<uint8_t> want(static_cast<size_t>(*dtype_row_bytes(DType::kQ8_0, x.size())));
  quantize_row(DType::kQ8_0, x.data(), want.data(), static_cast<int64_t>(x.size()));
  for (CpuPath path : {CpuPath::kScalar, CpuPath::kAvx2, CpuPath::kAvx512, CpuPath::kAvx512Vnni}) {
    if (path > hardware_cpu_path()) continue;
    std::vector<uint8_t> got(want.size(), 0xee);
    vector_kernels(path).quantize_q8_0(x.data(), got.data(), static_cast<int64_t>(x.size()));
    for (size_t b = 0; b < want.size(); b += 34) {
      ASSERT_TRUE(std::equal(want.begin() + b, want.begin() + b + 34, got.begin() + b))
          << cpu_path_name(path) << " block " << b / 34;
    }
  }
}

}  // namespace
}  // namespace duet::onednn
