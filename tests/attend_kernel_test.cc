// VectorKernels::attend and merge (backends/onednn/vector_kernels.h) on every
// CPU path this machine runs, against attention computed in double: shapes
// the model tests do not reach (groups of 1, 5 and 8 query heads per KV head,
// head_dim 16 and 128, position counts around the AVX-512 kernel's blocks of
// 16), f32 and f16 caches, and a cache read in two runs folded into one
// online-softmax state.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "duet/quant.h"
#include "kernels/cpu_features.h"
#include "vector_kernels.h"

namespace duet::onednn {
namespace {

struct Shape {
  int32_t kv_heads;
  int32_t group;
  int32_t head_dim;
  int64_t n;
};

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = uni(rng);
  return v;
}

// Rows of the cache are padded (stride > kv_heads * head_dim) as the slots of
// a real cache are not, so that reading past a head is caught by the values.
void check(const Shape& s, bool f16, CpuPath path) {
  const int64_t heads = int64_t{s.kv_heads} * s.group;
  const int64_t stride = int64_t{s.kv_heads} * s.head_dim + 16;
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
  const std::vector<float> q = random_floats(static_cast<size_t>(heads * s.head_dim), 1);
  std::vector<float> k = random_floats(static_cast<size_t>(s.n * stride), 2);
  std::vector<float> v = random_floats(static_cast<size_t>(s.n * stride), 3);
  std::vector<uint16_t> k16(k.size()), v16(v.size());
  for (size_t i = 0; i < k.size(); ++i) {
    k16[i] = f32_to_f16(k[i]);
    v16[i] = f32_to_f16(v[i]);
    if (f16) {  // the reference sees what the cache holds
      k[i] = f16_to_f32(k16[i]);
      v[i] = f16_to_f32(v16[i]);
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
  std::vector<float> scores(static_cast<size_t>(heads * s.n));
  const int64_t split = s.n / 3;
  for (auto [begin, end] : {std::pair<int64_t, int64_t>{0, split}, {split, s.n}}) {
    if (begin == end) continue;
    const void* kp =
        f16 ? static_cast<const void*>(k16.data() + begin * stride) : k.data() + begin * stride;
    const void* vp =
        f16 ? static_cast<const void*>(v16.data() + begin * stride) : v.data() + begin * stride;
    kernels.attend(q.data(), s.kv_heads, s.group, s.head_dim, scale, kp, vp, f16, stride,
                   end - begin, scores.data(), part);
  }
  std::vector<float> got(want.size());
  kernels.merge(&part, 1, static_cast<int32_t>(heads), s.head_dim, got.data());
  double err = 0.0, norm = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    err += (got[i] - want[i]) * (got[i] - want[i]);
    norm += want[i] * want[i];
  }
  EXPECT_LE(err / norm, 1e-10) << cpu_path_name(path) << (f16 ? " f16" : " f32") << " kv_heads "
                               << s.kv_heads << " group " << s.group << " head_dim " << s.head_dim
                               << " n " << s.n;
}

TEST(AttendKernel, MatchesDoubleAttentionOnEveryPath) {
  const Shape shapes[] = {{1, 1, 16, 1},   {2, 3, 64, 15},  {2, 3, 64, 16},  {3, 3, 64, 17},
                          {1, 5, 64, 100}, {2, 8, 128, 33}, {1, 4, 128, 64}, {3, 1, 32, 300}};
  for (CpuPath path : {CpuPath::kScalar, CpuPath::kAvx2, CpuPath::kAvx512, CpuPath::kAvx512Vnni}) {
    if (path > hardware_cpu_path()) continue;
    for (const Shape& s : shapes) {
      for (bool f16 : {false, true}) check(s, f16, path);
    }
  }
}

}  // namespace
}  // namespace duet::onednn
