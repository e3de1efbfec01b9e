// VectorKernels::attend and merge (backends/onednn/vector_kernels.h) on every
// CPU path this machine runs, against attention computed in double: shapes
// the model tests do not reach (groups of 1, 2, 5, 7 and 8 query heads per
// KV head, head_dim 16, 32, 96 and 128, position counts around the AVX-512
// kernel's blocks of 16 and the AVX2 kernel's of 8), f32, f16 and q8_0 caches, and a cache read in
// two runs folded into one online-softmax state, held to 1e-10; VectorKernels::attend_tiles over
// the same q8_0 caches moved into tiles from every slot of a tile (integer
// arithmetic, held to 1e-8) and the f16 caches likewise (f32 arithmetic,
// 1e-10), and the tiles' round trip. Also
// VectorKernels::quantize_q8_0 against duet::quantize_row, byte for byte,
// and VectorKernels::rope against its definition in double, bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "duet/quant.h"
#include "kernels/cpu_features.h"
#include "kernels/kv_tiles.h"
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

// A cache of n random positions in `type` (f32, f16 or q8_0, as
// duet::quantize_row stores it) and attention over it computed in double.
// Rows are padded (stride > kv_heads * head_dim) as the slots of a real
// cache are not, so that reading past a head is caught by the values.
struct Case {
  Shape s;
  DType type;
  int64_t stride_bytes;
  std::vector<float> q;
  std::vector<uint8_t> k_bytes, v_bytes;
  std::vector<double> want;  // [head][dim]
};

// With `spike`, position 0's key is its group's first query head scaled
// to a score of 78: that head's later probabilities are then ~e^-78
// (1e-34) against the running maximum, where a tile's weights scaled to
// 16 bits would overflow a float if the kernel did not treat them as 0.
Case make_case(const Shape& s, DType type, bool spike = false) {
  Case c{s, type, 0, {}, {}, {}, {}};
  const int64_t heads = int64_t{s.kv_heads} * s.group;
  const int64_t stride = int64_t{s.kv_heads} * s.head_dim + 32;  // elements
  c.stride_bytes = static_cast<int64_t>(*dtype_row_bytes(type, static_cast<uint64_t>(stride)));
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.head_dim));
  c.q = random_floats(static_cast<size_t>(heads * s.head_dim), 1);
  std::vector<float> k = random_floats(static_cast<size_t>(s.n * stride), 2);
  for (int64_t g = 0; spike && g < s.kv_heads; ++g) {
    const float* qh = c.q.data() + g * s.group * s.head_dim;
    double norm2 = 0.0;
    for (int64_t d = 0; d < s.head_dim; ++d) norm2 += double{qh[d]} * qh[d];
    const double gain = 78.0 * std::sqrt(static_cast<double>(s.head_dim)) / norm2;
    for (int64_t d = 0; d < s.head_dim; ++d)
      k[g * s.head_dim + d] = static_cast<float>(gain * qh[d]);
  }
  std::vector<float> v = random_floats(static_cast<size_t>(s.n * stride), 3);
  c.k_bytes.resize(static_cast<size_t>(s.n * c.stride_bytes));
  c.v_bytes.resize(c.k_bytes.size());
  for (int64_t i = 0; i < s.n; ++i) {
    for (auto [x, bytes] :
         {std::pair{k.data(), c.k_bytes.data()}, std::pair{v.data(), c.v_bytes.data()}}) {
      quantize_row(type, x + i * stride, bytes + i * c.stride_bytes, stride);
      dequantize_row(type, bytes + i * c.stride_bytes, x + i * stride, stride);
    }
  }
  // softmax(scale * q·k) · v over what the cache holds.
  c.want.resize(static_cast<size_t>(heads * s.head_dim));
  for (int64_t h = 0; h < heads; ++h) {
    const int64_t g = h / s.group;
    std::vector<double> w(static_cast<size_t>(s.n));
    double max = -INFINITY, total = 0.0;
    for (int64_t i = 0; i < s.n; ++i) {
      double dot = 0.0;
      for (int64_t d = 0; d < s.head_dim; ++d)
        dot += double{c.q[h * s.head_dim + d]} * k[i * stride + g * s.head_dim + d];
      w[i] = scale * dot;
      max = std::max(max, w[i]);
    }
    for (double& x : w) total += (x = std::exp(x - max));
    for (int64_t d = 0; d < s.head_dim; ++d) {
      double acc = 0.0;
      for (int64_t i = 0; i < s.n; ++i) acc += w[i] * v[i * stride + g * s.head_dim + d];
      c.want[h * s.head_dim + d] = acc / total;
    }
  }
  return c;
}

// Folds the positions into one online-softmax state over two runs, [0,
// split) and [split, n), calling attend_run(begin, end, scores, state) for
// each, and returns the normalised squared error of the merged output.
template <class AttendRun>
double run_and_compare(const Case& c, const VectorKernels& kernels, const AttendRun& attend_run) {
  const Shape& s = c.s;
  const int64_t heads = int64_t{s.kv_heads} * s.group;
  std::vector<float> state(static_cast<size_t>(heads * (2 + s.head_dim)), 0.0f);
  const SoftmaxPart part{state.data(), state.data() + heads, state.data() + 2 * heads};
  std::fill(part.max, part.max + heads, -INFINITY);
  std::vector<float> scores(static_cast<size_t>(heads * (s.n + s.head_dim) + 16 * s.head_dim));
  const int64_t split = s.n / 3;
  for (auto [begin, end] : {std::pair<int64_t, int64_t>{0, split}, {split, s.n}}) {
    if (begin != end) attend_run(begin, end, scores.data(), part);
  }
  std::vector<float> got(c.want.size());
  kernels.merge(&part, 1, static_cast<int32_t>(heads), s.head_dim, got.data());
  double err = 0.0, norm = 0.0;
  for (size_t i = 0; i < c.want.size(); ++i) {
    err += (got[i] - c.want[i]) * (got[i] - c.want[i]);
    norm += c.want[i] * c.want[i];
  }
  return err / norm;
}

float scale_of(const Shape& s) { return 1.0f / std::sqrt(static_cast<float>(s.head_dim)); }

void check(const Shape& s, DType type, CpuPath path) {
  const Case c = make_case(s, type);
  const VectorKernels& kernels = vector_kernels(path);
  const double nmse =
      run_and_compare(c, kernels, [&](int64_t begin, int64_t end, float* scores, SoftmaxPart st) {
        kernels.attend(c.q.data(), s.kv_heads, s.group, s.head_dim, scale_of(s),
                       c.k_bytes.data() + begin * c.stride_bytes,
                       c.v_bytes.data() + begin * c.stride_bytes, type, c.stride_bytes, end - begin,
                       scores, st);
      });
  EXPECT_LE(nmse, 1e-10) << cpu_path_name(path) << " " << dtype_name(type) << " kv_heads "
                         << s.kv_heads << " group " << s.group << " head_dim " << s.head_dim
                         << " n " << s.n;
}

// The same q8_0 or f16 cache moved into tiles (kernels/kv_tiles.h) from
// slot `lane0` on, read by `path`'s attend_tiles. The tiles hold one more
// KV head in front (random), which the kernel is pointed past, and lie 64
// bytes further apart than they need; the unused slots and the padding are
// random bytes (for f16 some of them NaN or infinite, which must not reach
// the results).
void check_tiles(const Shape& s, DType type, CpuPath path, int32_t lane0, bool spike) {
  const Case c = make_case(s, type, spike);
  const VectorKernels& kernels = vector_kernels(path);
  const int32_t tile_heads = s.kv_heads + 1;
  const int64_t head_bytes = tile_head_bytes(type, s.head_dim);
  const int64_t tile_bytes = tile_heads * head_bytes + 64;
  const int64_t n_tiles = (lane0 + s.n + kTileSlots - 1) / kTileSlots;
  std::vector<uint8_t> k_tiles(static_cast<size_t>(n_tiles * tile_bytes));
  std::vector<uint8_t> v_tiles(k_tiles.size());
  std::mt19937 bytes(5);
  for (size_t i = 0; i < k_tiles.size(); ++i) {
    k_tiles[i] = static_cast<uint8_t>(bytes());
    v_tiles[i] = static_cast<uint8_t>(bytes());
  }
  // A slot's row: a random first head, then the case's heads.
  const int64_t first_head = head_bytes / kTileSlots;  // row bytes of one head
  std::vector<uint8_t> row(static_cast<size_t>(tile_heads * first_head));
  const std::vector<float> junk = random_floats(static_cast<size_t>(s.head_dim), 6);
  quantize_row(type, junk.data(), row.data(), s.head_dim);
  for (int64_t i = 0; i < s.n; ++i) {
    const int64_t at = tile_offset(lane0 + i, tile_bytes / kTileSlots);
    for (auto [part, from, tiles] : {std::tuple{TilePart::kKeys, c.k_bytes.data(), &k_tiles},
                                     std::tuple{TilePart::kValues, c.v_bytes.data(), &v_tiles}}) {
      std::copy_n(from + i * c.stride_bytes, row.size() - first_head, row.begin() + first_head);
      put_tile_row(type, part, row.data(), tile_heads, s.head_dim, tiles->data() + at,
                   tile_lane(lane0 + i));
    }
  }
  const double nmse =
      run_and_compare(c, kernels, [&](int64_t begin, int64_t end, float* scores, SoftmaxPart st) {
        const int64_t at = tile_offset(lane0 + begin, tile_bytes / kTileSlots) + head_bytes;
        kernels.attend_tiles(c.q.data(), s.kv_heads, s.group, s.head_dim, scale_of(s), type,
                             k_tiles.data() + at, v_tiles.data() + at, tile_bytes,
                             tile_lane(lane0 + begin), end - begin, scores, st);
      });
  // q8_0: queries in two int8 terms (~16 bits) and probabilities in 15
  // bits; f16: f32 arithmetic, as the rows.
  EXPECT_LE(nmse, type == DType::kQ8_0 ? 1e-8 : 1e-10)
      << cpu_path_name(path) << " " << dtype_name(type) << " lane0 " << lane0 << " spike " << spike
      << " kv_heads " << s.kv_heads << " group " << s.group << " head_dim " << s.head_dim << " n "
      << s.n;
}

const Shape kShapes[] = {{1, 1, 16, 1},
                         {2, 3, 64, 15},
                         {2, 3, 64, 16},
                         {3, 3, 64, 17},
                         {1, 5, 64, 100},
                         {2, 8, 128, 33},
                         {1, 4, 128, 64},
                         {3, 1, 32, 300},
                         {2, 2, 96, 40},
                         {1, 7, 96, 33},
                         {3, 3, 64, 1},
                         {2, 3, 64, 23},
                         {1, 2, 32, 2},
                         // head_dim past the last 64: 16, 32 or 48 more.
                         {1, 2, 48, 17},
                         {2, 2, 80, 33},
                         {1, 3, 112, 40}};

TEST(AttendKernel, MatchesDoubleAttentionOnEveryPath) {
  for (CpuPath path : {CpuPath::kScalar, CpuPath::kAvx2, CpuPath::kAvx512, CpuPath::kAvx512Vnni}) {
    if (path > hardware_cpu_path()) continue;
    for (const Shape& s : kShapes) {
      for (DType type : {DType::kF32, DType::kF16, DType::kQ8_0}) {
        if (type == DType::kQ8_0 && s.head_dim % 32 != 0) continue;  // blocks would span heads
        check(s, type, path);
      }
    }
  }
}

TEST(AttendKernel, TilesMatchDoubleAttentionFromEverySlot) {
  if (hardware_cpu_path() < CpuPath::kAvx512) {
    GTEST_SKIP() << "attend_tiles needs AVX-512, which this CPU lacks";
  }
  for (CpuPath path : {CpuPath::kAvx512, CpuPath::kAvx512Vnni}) {
    if (path > hardware_cpu_path()) continue;
    for (DType type : {DType::kF16, DType::kQ8_0}) {
      if (type == DType::kQ8_0 && path != CpuPath::kAvx512Vnni) continue;  // rows there
      for (const Shape& s : kShapes) {
        if (type == DType::kQ8_0 && s.head_dim % 32 != 0) continue;  // blocks would span heads
        for (int32_t lane0 = 0; lane0 < kTileSlots; ++lane0) {
          for (bool spike : {false, true}) check_tiles(s, type, path, lane0, spike);
        }
      }
    }
  }
}

// Only the AVX-512 paths read tiles.
TEST(AttendKernel, TilesAreReadOnTheAvx512PathsAlone) {
  for (CpuPath path : {CpuPath::kScalar, CpuPath::kAvx2, CpuPath::kAvx512, CpuPath::kAvx512Vnni}) {
    EXPECT_EQ(vector_kernels(path).attend_tiles != nullptr, path >= CpuPath::kAvx512)
        << cpu_path_name(path);
  }
}

// A q8_0 or f16 row put into a tile and got back is the same bytes, in
// every slot and beside its neighbours, and expands to the floats of the
// row.
TEST(KvTiles, RowsComeBackAsTheyWentIn) {
  for (const auto& [kv_heads, head_dim] : {std::pair{3, 64}, {2, 96}, {1, 32}})
    for (DType type : {DType::kQ8_0, DType::kF16}) {
      const int64_t row_elements = int64_t{kv_heads} * head_dim;
      const auto row_bytes =
          static_cast<int64_t>(*dtype_row_bytes(type, static_cast<uint64_t>(row_elements)));
      for (TilePart part : {TilePart::kKeys, TilePart::kValues}) {
        std::vector<uint8_t> rows(static_cast<size_t>(kTileSlots * row_bytes));
        const std::vector<float> x =
            random_floats(static_cast<size_t>(kTileSlots * row_elements), 6);
        for (int64_t j = 0; j < kTileSlots; ++j) {
          quantize_row(type, x.data() + j * row_elements, rows.data() + j * row_bytes,
                       row_elements);
        }
        std::vector<uint8_t> tile(static_cast<size_t>(kv_heads * tile_head_bytes(type, head_dim)));
        ASSERT_EQ(static_cast<int64_t>(tile.size()), kTileSlots * row_bytes);  // no larger
        for (int32_t j = 0; j < kTileSlots; ++j) {
          put_tile_row(type, part, rows.data() + j * row_bytes, kv_heads, head_dim, tile.data(), j);
        }
        std::vector<uint8_t> back(static_cast<size_t>(row_bytes));
        for (int32_t j = 0; j < kTileSlots; ++j) {
          get_tile_row(type, part, tile.data(), j, kv_heads, head_dim, back.data());
          EXPECT_TRUE(std::equal(back.begin(), back.end(), rows.begin() + j * row_bytes))
              << dtype_name(type) << " slot " << j << " kv_heads " << kv_heads << " head_dim "
              << head_dim;
        }
      }
    }
}

// One row put into a zeroed tile lands where kv_tiles.h's layout says,
// byte for byte, and nowhere else.
TEST(KvTiles, ARowLandsWhereTheLayoutSays) {
  constexpr int32_t kv_heads = 2, head_dim = 64, blocks = head_dim / 32, lane = 5;
  const int64_t head_bytes = tile_head_bytes(DType::kQ8_0, head_dim);
  std::vector<uint8_t> row(static_cast<size_t>(kv_heads * blocks * 34));
  for (size_t i = 0; i < row.size(); ++i) row[i] = static_cast<uint8_t>(i % 251 + 1);
  for (TilePart part : {TilePart::kKeys, TilePart::kValues}) {
    std::vector<uint8_t> tile(static_cast<size_t>(kv_heads * head_bytes), 0);
    put_tile_row(DType::kQ8_0, part, row.data(), kv_heads, head_dim, tile.data(), lane);
    EXPECT_EQ(static_cast<size_t>(std::count(tile.begin(), tile.end(), 0)),
              tile.size() - row.size());
    for (int32_t g = 0; g < kv_heads; ++g) {
      const uint8_t* head = tile.data() + g * head_bytes;
      for (int32_t b = 0; b < blocks; ++b) {
        const uint8_t* block = row.data() + (g * blocks + b) * 34;
        EXPECT_EQ(head[16 * head_dim + 2 * (16 * b + lane)], block[0]);
        EXPECT_EQ(head[16 * head_dim + 2 * (16 * b + lane) + 1], block[1]);
        for (int32_t e = 0; e < 32; ++e) {
          const int32_t d = 32 * b + e;
          const int64_t at = part == TilePart::kKeys
                                 ? 64 * (d / 4) + 4 * lane + d % 4
                                 : 2 * (int64_t{head_dim} * (lane / 2) + d) + lane % 2;
          ASSERT_EQ(head[at], block[2 + e]) << "head " << g << " element " << d;
        }
      }
    }
  }
}

// The same for an f16 row: keys dimension-major, values as rows.
TEST(KvTiles, AnF16RowLandsWhereTheLayoutSays) {
  constexpr int32_t kv_heads = 2, head_dim = 48, lane = 11;
  const int64_t head_bytes = tile_head_bytes(DType::kF16, head_dim);
  ASSERT_EQ(head_bytes, kTileSlots * 2 * head_dim);
  std::vector<uint8_t> row(static_cast<size_t>(kv_heads * head_dim * 2));
  for (size_t i = 0; i < row.size(); ++i) row[i] = static_cast<uint8_t>(i % 251 + 1);
  for (TilePart part : {TilePart::kKeys, TilePart::kValues}) {
    std::vector<uint8_t> tile(static_cast<size_t>(kv_heads * head_bytes), 0);
    put_tile_row(DType::kF16, part, row.data(), kv_heads, head_dim, tile.data(), lane);
    EXPECT_EQ(static_cast<size_t>(std::count(tile.begin(), tile.end(), 0)),
              tile.size() - row.size());
    for (int32_t g = 0; g < kv_heads; ++g) {
      const uint8_t* head = tile.data() + g * head_bytes;
      for (int32_t d = 0; d < head_dim; ++d) {
        const int64_t at =
            part == TilePart::kKeys ? 2 * (16 * d + lane) : 2 * (int64_t{head_dim} * lane + d);
        const uint8_t* element = row.data() + 2 * (g * head_dim + d);
        ASSERT_EQ(head[at], element[0]) << "head " << g << " element " << d;
        ASSERT_EQ(head[at + 1], element[1]) << "head " << g << " element " << d;
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

// Rope on every path, both pairings, for head sizes whose pairs fill whole
// vectors (64, 128) and leave a tail on every width (80, 6, 2): each element
// must be its definition — the float products exact in double, one
// rounding to float — to the bit.
TEST(RopeKernel, RotatesEveryPairAsItsDefinitionOnEveryPath) {
  for (int64_t head_dim : {64, 128, 80, 6, 2}) {
    const int64_t half = head_dim / 2;
    const std::vector<float> x = random_floats(head_dim, 7, -4.0f, 4.0f);
    const std::vector<float> angles = random_floats(half, 8, -100.0f, 100.0f);
    std::vector<float> cs;
    for (float a : angles) {
      cs.push_back(std::cos(a));
      cs.push_back(std::sin(a));
    }
    for (bool adjacent : {true, false}) {
      std::vector<float> want = x;
      for (int64_t j = 0; j < half; ++j) {
        float& a = want[static_cast<size_t>(adjacent ? 2 * j : j)];
        float& b = want[static_cast<size_t>(adjacent ? 2 * j + 1 : j + half)];
        const double c = cs[static_cast<size_t>(2 * j)], sn = cs[static_cast<size_t>(2 * j + 1)];
        const double da = a, db = b;
        a = static_cast<float>(da * c - db * sn);
        b = static_cast<float>(da * sn + db * c);
      }
      for (CpuPath path :
           {CpuPath::kScalar, CpuPath::kAvx2, CpuPath::kAvx512, CpuPath::kAvx512Vnni}) {
        if (path > hardware_cpu_path()) continue;
        std::vector<float> got = x;
        vector_kernels(path).rope(got.data(), cs.data(), half, adjacent);
        for (size_t i = 0; i < got.size(); ++i) {
          ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
              << cpu_path_name(path) << ", head_dim " << head_dim
              << (adjacent ? ", adjacent" : ", halves") << ", element " << i;
        }
      }
    }
  }
}

// GEMM panels of the 5-bit formats and K-quants are expanded by
// expand_kquant: every value must be duet::dequantize_row's, bit for bit, on
// every path (random bytes, f16 scales of every binade, either sign).
TEST(ExpandWeights, KQuantsEqualDequantizeRowOnEveryPath) {
  std::mt19937 rng(12);
  std::uniform_int_distribution<int> byte(0, 255);
  for (DType t : {DType::kQ5_0, DType::kQ5_1, DType::kIQ4_NL, DType::kQ2_K, DType::kQ3_K,
                  DType::kQ4_K, DType::kQ5_K, DType::kQ6_K}) {
    const int64_t n = 256 * 6;
    std::vector<uint8_t> blocks(static_cast<size_t>(*dtype_row_bytes(t, n)));
    for (uint8_t& b : blocks) b = static_cast<uint8_t>(byte(rng));
    // Keep the f16 fields finite (random bytes make some NaN or inf).
    const int64_t block_bytes = dtype_traits(t).block_bytes;
    // The f16 fields lead the block, except q2_k's two, q3_k's and q6_k's one
    // at its end.
    const bool one_at_end = t == DType::kQ3_K || t == DType::kQ6_K;
    const int fields = t == DType::kQ5_0 || t == DType::kIQ4_NL || one_at_end ? 1 : 2;
    const int64_t f16_at = one_at_end ? block_bytes - 2 : t == DType::kQ2_K ? block_bytes - 4 : 0;
    for (size_t at = 0; at < blocks.size(); at += static_cast<size_t>(block_bytes)) {
      for (int f = 0; f < fields; ++f) blocks[at + f16_at + 2 * f + 1] &= 0xbb;  // exponent < 31
    }
    std::vector<float> want(static_cast<size_t>(n));
    dequantize_row(t, blocks.data(), want.data(), n);
    for (CpuPath path :
         {CpuPath::kScalar, CpuPath::kAvx2, CpuPath::kAvx512, CpuPath::kAvx512Vnni}) {
      if (path > hardware_cpu_path()) continue;
      std::vector<float> got(want.size(), -1.0f);
      vector_kernels(path).expand_kquant(t, blocks.data(), got.data(), n);
      for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
            << dtype_name(t) << " " << cpu_path_name(path) << " element " << i << ": " << got[i]
            << " vs " << want[i];
      }
    }
  }
}

}  // namespace
}  // namespace duet::onednn
