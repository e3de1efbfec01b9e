// Decode attention over a tiled q8_0 cache; see attend_tiles.h.
#include <algorithm>
#include <cstring>

#include "kernels/attend_tiles.h"
#include "kernels/avx512_intrinsics.h"
#include "kernels/kv_tiles.h"
#include "kernels/prefetch.h"
#include "kernels/with_heads.h"

namespace duet::onednn::detail {
namespace {

constexpr int kQ8 = 32;  // elements per q8_0 block

// The positions of tile t: lane j holds position first + j, first =
// 16 t - lane0; `lanes` marks those in [0, n).
struct TileLanes {
  int64_t first;
  __mmask16 lanes;
};

TileLanes tile_lanes(int64_t t, int32_t lane0, int64_t n) {
  const int64_t first = kTileSlots * t - lane0;
  uint32_t lanes = 0xffffu;
  if (first < 0) lanes &= 0xffffu << -first;
  if (n - first < kTileSlots) lanes &= (1u << (n - first)) - 1;
  return {first, static_cast<__mmask16>(lanes)};
}

constexpr CacheLevel kL1 = CacheLevel::kL1, kL2 = CacheLevel::kL2;

// Below this a scale is treated as 0: its reciprocal would overflow, and
// what it scales cannot reach a float sum of order 1.
constexpr float kTiny = 0x1p-100f;

// How many tiles ahead the keys are fetched into L2, besides the next tile
// into L1. In-process A/B (decode at 2k cached tokens, 2 threads, attention
// time): L2 prefetches at half this distance took 0.86–0.93 of the time of
// L1 prefetches alone; this distance 0.93–0.98 of half of it; twice it
// 1.02–1.05 of this. The values, read a tile at a time in the order they
// lie, are left to the hardware prefetchers: prefetching the next tile into
// L1 and the 12th into L2 gave 0.97–1.00 of their speed at depth 1,919.
constexpr int64_t kScoresAhead = 12;

// ---- scores ------------------------------------------------------------------

// One KV head's query heads in two int8 terms, per block b of head h:
// hi/lo at (h * blocks + b) * 32, scale s / 256 and the correction
// 128 · Σ(256·hi + lo) at h * blocks + b.
struct QueryTerms {
  int8_t* hi;
  int8_t* lo;
  float* unit;
  int32_t* offset;
};

void quantize_queries(const float* q, int64_t heads, int32_t head_dim, QueryTerms t) {
  const int32_t blocks = head_dim / kQ8;
  for (int64_t hb = 0; hb < heads * blocks; ++hb) {
    const float* x = q + hb * kQ8;
    const __m512 a = _mm512_loadu_ps(x), b = _mm512_loadu_ps(x + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(a), _mm512_abs_ps(b)));
    const float s = amax / 127.0f;
    const __m512 inv = _mm512_set1_ps(s > kTiny ? 1.0f / s : 0.0f);
    int32_t sum = 0;
    for (int half = 0; half < 2; ++half) {
      const __m512 y = _mm512_mul_ps(half ? b : a, inv);
      const __m512i hi = _mm512_cvtps_epi32(y);  // to nearest: |hi| ≤ 127
      const __m512 rest =
          _mm512_mul_ps(_mm512_sub_ps(y, _mm512_cvtepi32_ps(hi)), _mm512_set1_ps(256.0f));
      const __m512i lo =
          _mm512_max_epi32(_mm512_set1_epi32(-127),
                           _mm512_min_epi32(_mm512_set1_epi32(127), _mm512_cvtps_epi32(rest)));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(t.hi + hb * kQ8 + 16 * half),
                       _mm512_cvtepi32_epi8(hi));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(t.lo + hb * kQ8 + 16 * half),
                       _mm512_cvtepi32_epi8(lo));
      sum += _mm512_reduce_add_epi32(_mm512_add_epi32(_mm512_slli_epi32(hi, 8), lo));
    }
    t.unit[hb] = s / 256.0f;
    t.offset[hb] = 128 * sum;
  }
}

// Four query bytes as one 32-bit lane, to broadcast.
__attribute__((always_inline)) inline int32_t four_bytes(const int8_t* p) {
  int32_t x;
  std::memcpy(&x, p, sizeof x);
  return x;
}

// total[h] += the scores (without `scale`) of block b of the tile's 16
// positions for query heads h0 .. h0 + H of `t`. vpdpbusd takes unsigned
// bytes on one side, so keys are read as k + 128 and 128·Σq is taken off.
template <int H>
__attribute__((always_inline)) inline void block_dots(const uint8_t* head, int32_t head_dim,
                                                      int32_t b, QueryTerms t, int64_t h0,
                                                      __m512* total) {
  const int32_t blocks = head_dim / kQ8;
  __m512i k[8];
  for (int c = 0; c < 8; ++c) {
    k[c] = _mm512_xor_si512(_mm512_loadu_si512(head + 64 * (8 * b + c)),
                            _mm512_set1_epi8(static_cast<char>(0x80)));
  }
  const __m512 key_scale = _mm512_cvtph_ps(
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(head + 16 * head_dim + 32 * b)));
  for (int h = 0; h < H; ++h) {
    const int64_t hb = (h0 + h) * blocks + b;
    const int8_t* hi = t.hi + hb * kQ8;
    const int8_t* lo = t.lo + hb * kQ8;
    // Four chains of vpdpbusd (its latency would bind one).
    __m512i hi0 = _mm512_setzero_si512(), hi1 = hi0, lo0 = hi0, lo1 = hi0;
    for (int c = 0; c < 8; c += 2) {
      hi0 = _mm512_dpbusd_epi32(hi0, k[c], _mm512_set1_epi32(four_bytes(hi + 4 * c)));
      hi1 = _mm512_dpbusd_epi32(hi1, k[c + 1], _mm512_set1_epi32(four_bytes(hi + 4 * c + 4)));
      lo0 = _mm512_dpbusd_epi32(lo0, k[c], _mm512_set1_epi32(four_bytes(lo + 4 * c)));
      lo1 = _mm512_dpbusd_epi32(lo1, k[c + 1], _mm512_set1_epi32(four_bytes(lo + 4 * c + 4)));
    }
    __m512i acc = _mm512_add_epi32(_mm512_slli_epi32(_mm512_add_epi32(hi0, hi1), 8),
                                   _mm512_add_epi32(lo0, lo1));
    acc = _mm512_sub_epi32(acc, _mm512_set1_epi32(t.offset[hb]));
    total[h] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc),
                               _mm512_mul_ps(key_scale, _mm512_set1_ps(t.unit[hb])), total[h]);
  }
}

}  // namespace

void attend_tile_scores_vnni(const float* q, int32_t kv_heads, int32_t group, int32_t head_dim,
                             float scale, const uint8_t* tiles, int64_t tile_bytes, int32_t lane0,
                             int64_t n, float* scores, float* staging) {
  const int32_t blocks = head_dim / kQ8;
  const int64_t heads = int64_t{kv_heads} * group;
  const int64_t head_bytes = tile_head_bytes(DType::kQ8_0, head_dim);
  auto* bytes = reinterpret_cast<int8_t*>(staging);
  const int64_t terms = heads * head_dim;
  auto* unit = reinterpret_cast<float*>(bytes + 2 * terms);
  const QueryTerms t{bytes, bytes + terms, unit, reinterpret_cast<int32_t*>(unit + heads * blocks)};
  quantize_queries(q, heads, head_dim, t);
  const __m512 vscale = _mm512_set1_ps(scale);
  const int64_t n_tiles = (lane0 + n + kTileSlots - 1) / kTileSlots;
  for (int64_t tile = 0; tile < n_tiles; ++tile) {
    const uint8_t* base = tiles + tile * tile_bytes;
    // This task's KV heads of the next tile into L1, and further into L2.
    if (tile + 1 < n_tiles) prefetch_lines<kL1>(base + tile_bytes, kv_heads * head_bytes);
    if (tile + kScoresAhead < n_tiles) {
      prefetch_lines<kL2>(base + kScoresAhead * tile_bytes, kv_heads * head_bytes);
    }
    const TileLanes at = tile_lanes(tile, lane0, n);
    for (int64_t g = 0; g < kv_heads; ++g) {
      const uint8_t* head = base + g * head_bytes;
      // Query heads four at a time: their sums stay in registers.
      for (int64_t h0 = g * group; h0 < (g + 1) * group; h0 += 4) {
        with_heads<4>(std::min<int64_t>(4, (g + 1) * group - h0), [&]<int H>() {
          __m512 total[H];
          for (int h = 0; h < H; ++h) total[h] = _mm512_setzero_ps();
          for (int32_t b = 0; b < blocks; ++b) block_dots<H>(head, head_dim, b, t, h0, total);
          for (int h = 0; h < H; ++h) {
            float* out = scores + (h0 + h) * n;
            const __m512 s = _mm512_mul_ps(total[h], vscale);
            if (at.first < 0) {
              _mm512_mask_compressstoreu_ps(out, at.lanes, s);
            } else {
              _mm512_mask_storeu_ps(out + at.first, at.lanes, s);
            }
          }
        });
      }
    }
  }
}

namespace {

// ---- values ------------------------------------------------------------------

// acc[h][c0 + d] += Σ_i probs[h][i] * v_i[c0 + d], d < 32 · blocks (1 or
// 2), for H heads of one KV head over the positions `at` of one tile, whose
// part for that KV head is at `head`.
template <int H, int kBlocks>
__attribute__((always_inline)) inline void values_chunk(const uint8_t* head, TileLanes at,
                                                        int64_t n, int32_t head_dim, int64_t c0,
                                                        const float* probs, float* acc) {
  constexpr int kChunks = 2 * kBlocks;  // of 16 dimensions
  // w = p · s per position and block, as int16 in units of the largest p
  // of the head times the largest s of the block over the tile: pair j
  // of head h, block b is dword j of w16[h][b].
  __m512 p[H];
  float p_max[H];
  for (int h = 0; h < H; ++h) {
    p[h] = at.first < 0 ? _mm512_maskz_expandloadu_ps(at.lanes, probs + h * n)
                        : _mm512_maskz_loadu_ps(at.lanes, probs + h * n + at.first);
    p_max[h] = _mm512_reduce_max_ps(p[h]);
  }
  alignas(32) uint32_t w16[H][kBlocks][8];
  float unit[H][kBlocks];
  for (int b = 0; b < kBlocks; ++b) {
    const __m512 s = _mm512_maskz_mov_ps(
        at.lanes, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(
                      head + 16 * head_dim + 2 * 16 * (c0 / kQ8 + b)))));
    const float s_max = _mm512_reduce_max_ps(s);
    for (int h = 0; h < H; ++h) {
      const float largest = p_max[h] * s_max;
      unit[h][b] = largest / 32767.0f;
      const __m512 w = _mm512_mul_ps(_mm512_mul_ps(p[h], s),
                                     _mm512_set1_ps(largest > kTiny ? 32767.0f / largest : 0.0f));
      _mm256_store_si256(reinterpret_cast<__m256i*>(w16[h][b]),
                         _mm512_cvtsepi32_epi16(_mm512_maskz_cvtps_epi32(at.lanes, w)));
    }
  }
  // Slots outside the run have w = 0 (their bytes are read, not used).
  __m512i sum[H][kChunks];
  for (int h = 0; h < H; ++h) {
    for (int u = 0; u < kChunks; ++u) sum[h][u] = _mm512_setzero_si512();
  }
  for (int j = 0; j < kTileSlots / 2; ++j) {
    __m512i x[kChunks];
    for (int u = 0; u < kChunks; ++u) {
      x[u] = _mm512_cvtepi8_epi16(_mm256_loadu_si256(
          reinterpret_cast<const __m256i*>(head + 2 * (int64_t{head_dim} * j + c0 + 16 * u))));
    }
    for (int h = 0; h < H; ++h) {
      for (int u = 0; u < kChunks; ++u) {
        sum[h][u] = _mm512_dpwssd_epi32(sum[h][u], x[u],
                                        _mm512_set1_epi32(static_cast<int32_t>(w16[h][u / 2][j])));
      }
    }
  }
  for (int h = 0; h < H; ++h) {
    for (int u = 0; u < kChunks; ++u) {
      float* a = acc + h * head_dim + c0 + 16 * u;
      _mm512_storeu_ps(a, _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum[h][u]),
                                          _mm512_set1_ps(unit[h][u / 2]), _mm512_loadu_ps(a)));
    }
  }
}

}  // namespace

void attend_tile_values_vnni(int32_t kv_heads, int32_t group, int32_t head_dim,
                             const uint8_t* tiles, int64_t tile_bytes, int32_t lane0, int64_t n,
                             const float* probs, float* acc) {
  const int64_t head_bytes = tile_head_bytes(DType::kQ8_0, head_dim);
  const int64_t n_tiles = (lane0 + n + kTileSlots - 1) / kTileSlots;
  // A tile at a time, as the cache lies: heads three at a time and 64
  // dimensions at a time, their sums added to `acc` once per tile.
  for (int64_t tile = 0; tile < n_tiles; ++tile) {
    const uint8_t* base = tiles + tile * tile_bytes;
    const TileLanes at = tile_lanes(tile, lane0, n);
    for (int64_t g = 0; g < kv_heads; ++g) {
      const uint8_t* head = base + g * head_bytes;
      for (int64_t h0 = g * group; h0 < (g + 1) * group; h0 += 3) {
        for (int64_t c0 = 0; c0 < head_dim; c0 += 64) {
          with_heads<3>(std::min<int64_t>(3, (g + 1) * group - h0), [&]<int H>() {
            if (head_dim - c0 >= 64) {
              values_chunk<H, 2>(head, at, n, head_dim, c0, probs + h0 * n, acc + h0 * head_dim);
            } else {
              values_chunk<H, 1>(head, at, n, head_dim, c0, probs + h0 * n, acc + h0 * head_dim);
            }
          });
        }
      }
    }
  }
}

}  // namespace duet::onednn::detail
