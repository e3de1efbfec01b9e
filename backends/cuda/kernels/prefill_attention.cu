// prefill_attention.cu — causal attention of a prompt chunk: many
// consecutive positions of one sequence, each seeing every position up to
// its own (or, in a sliding-window layer, the last AttentionArgs::window
// of them).
//
// attention.cu gives every query row a block of its own, so a chunk of n
// rows reads each cached K/V row up to n times: at 2,000 positions the
// reads, not the arithmetic, are the cost. Here one block takes a tile of
// kAttentionTileRows consecutive rows of one query head (4 warps, rows
// w, w + 4, ... to warp w, so that the causal mask leaves the warps equal
// work) and walks the positions in tiles of 32: the block stages a tile's K
// and V rows in shared memory once (widened to f32 from the cache's type),
// then each warp, for each of its rows, scores the 32 positions (one per
// lane, q·k over head_dim), updates the row's running max and sum (online
// softmax) and accumulates the weighted V rows (each lane owning head
// dimensions lane, lane + 32, ...), as attention.cu does for one row.
// Everything is f32. K rows are padded to head_dim + 1 floats in shared
// memory so that 32 lanes reading one element of 32 keys hit 32 banks.
#include <cmath>
#include <type_traits>

#include "cache_row.cuh"
#include "common.cuh"

namespace duet::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kKeys = 32;  // positions per staged tile
constexpr int kRowsPerWarp = kAttentionTileRows / kWarps;
static_assert(kAttentionTileRows % kWarps == 0);

size_t tile_smem_bytes(int head_dim) {
  return sizeof(float) *
         (static_cast<size_t>(kAttentionTileRows) * head_dim +
          static_cast<size_t>(kKeys) * (head_dim + 1) + static_cast<size_t>(kKeys) * head_dim);
}

template <int kPerLane, typename CacheT>
__global__ void tiled_attention_kernel(AttentionArgs a) {
  wait_for_previous_kernel();
  extern __shared__ float smem[];
  using Row = CacheRow<CacheT>;
  const int hd = a.head_dim;
  const int ld = hd + 1;
  float* q_s = smem;                           // [tile rows][hd], times scale
  float* k_s = q_s + kAttentionTileRows * hd;  // [kKeys][ld]
  float* v_s = k_s + kKeys * ld;               // [kKeys][hd]

  const int head = static_cast<int>(blockIdx.y);
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int kv_head = head / (a.n_heads / a.n_kv_heads);
  const int64_t slot_elements = static_cast<int64_t>(a.n_kv_heads) * hd;
  const int64_t head_offset = static_cast<int64_t>(kv_head) * hd;
  const int64_t first = a.first_row + static_cast<int64_t>(blockIdx.x) * kAttentionTileRows;
  const int rows = static_cast<int>(
      min(static_cast<int64_t>(kAttentionTileRows), a.first_row + a.n_tokens - first));
  // The rows are one sequence's, in positional order (AttentionArgs::tiled).
  const int32_t* table = a.block_tables + a.row_table[first];
  const int last_position = a.row_position[first + rows - 1];
  // The tile's first row sees the earliest positions (its window's start).
  const int first_position = a.window > 0 ? max(0, a.row_position[first] - a.window + 1) : 0;
  const int bt = a.block_tokens;

  for (int i = static_cast<int>(threadIdx.x); i < rows * hd; i += kWarps * 32) {
    const int r = i / hd;
    q_s[i] = a.q[((first + r) * a.n_heads + head) * hd + i % hd] * a.scale;
  }

  float acc[kRowsPerWarp][kPerLane] = {};
  float run_max[kRowsPerWarp];
  float run_sum[kRowsPerWarp];
#pragma unroll
  for (int rr = 0; rr < kRowsPerWarp; ++rr) {
    run_max[rr] = -INFINITY;
    run_sum[rr] = 0.0f;
  }

  for (int t0 = first_position; t0 <= last_position; t0 += kKeys) {
    __syncthreads();  // the previous tile is consumed (and, at first, q_s is written)
    for (int i = static_cast<int>(threadIdx.x); i < kKeys * hd; i += kWarps * 32) {
      const int j = i / hd;
      const int d = i % hd;
      const int p = t0 + j;
      float k = 0.0f;
      float v = 0.0f;
      if (p <= last_position) {
        const int64_t slot = static_cast<int64_t>(table[p / bt]) * bt + p % bt;
        k = Row::get(Row::head(a.k_cache, slot, slot_elements, head_offset), d);
        v = Row::get(Row::head(a.v_cache, slot, slot_elements, head_offset), d);
      }
      k_s[j * ld + d] = k;
      v_s[j * hd + d] = v;
    }
    __syncthreads();
#pragma unroll
    for (int rr = 0; rr < kRowsPerWarp; ++rr) {
      const int r = warp + rr * kWarps;
      if (r >= rows) continue;  // uniform across the warp, as is the next test
      // The row sees positions [row_first, row_last].
      const int row_last = a.row_position[first + r];
      const int row_first = a.window > 0 ? max(0, row_last - a.window + 1) : 0;
      if (t0 > row_last || t0 + kKeys <= row_first) continue;
      const int p = t0 + lane;
      const bool seen = p >= row_first && p <= row_last;
      float score = -INFINITY;
      if (seen) {
        const float* q = q_s + r * hd;
        const float* k = k_s + lane * ld;
        float dot = 0.0f;
#pragma unroll
        for (int d = 0; d < 32 * kPerLane; ++d) {
          if (d < hd) dot += q[d] * k[d];
        }
        score = dot;
      }
      // Some position of the tile is visible to this row, so new_max is
      // finite and the first rescale is exp(-inf) = 0.
      const float new_max = fmaxf(run_max[rr], warp_max(score));
      const float rescale = expf(run_max[rr] - new_max);
      const float weight = seen ? expf(score - new_max) : 0.0f;
      run_sum[rr] = run_sum[rr] * rescale + warp_sum(weight);
      const int visible = min(kKeys, row_last - t0 + 1);
#pragma unroll
      for (int c = 0; c < kPerLane; ++c) acc[rr][c] *= rescale;
#pragma unroll
      for (int j = 0; j < kKeys; ++j) {
        const float w = __shfl_sync(0xffffffffu, weight, j);
        if (j < visible) {
#pragma unroll
          for (int c = 0; c < kPerLane; ++c) {
            const int d = lane + 32 * c;
            if (d < hd) acc[rr][c] += w * v_s[j * hd + d];
          }
        }
      }
      run_max[rr] = new_max;
    }
  }

#pragma unroll
  for (int rr = 0; rr < kRowsPerWarp; ++rr) {
    const int r = warp + rr * kWarps;
    if (r >= rows) continue;
    float* out = a.out + ((first + r) * a.n_heads + head) * hd;
#pragma unroll
    for (int c = 0; c < kPerLane; ++c) {
      const int d = lane + 32 * c;
      if (d < hd) out[d] = acc[rr][c] / run_sum[rr];
    }
  }
}

// The kernel for this cache type, allowed the shared memory it needs for
// head dimensions up to 32 * kPerLane (past the default 48 KiB at 128). The
// attribute belongs to the current device, so it is set at every launch
// (prefill launches are few and eager; the call is cheap).
template <int kPerLane, typename CacheT>
cudaError_t launch_for(const LaunchConfig& at, const AttentionArgs& a) {
  auto kernel = tiled_attention_kernel<kPerLane, CacheT>;
  const cudaError_t allowed =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(tile_smem_bytes(32 * kPerLane)));
  if (allowed != cudaSuccess) return allowed;
  const dim3 grid(
      static_cast<unsigned int>((a.n_tokens + kAttentionTileRows - 1) / kAttentionTileRows),
      static_cast<unsigned int>(a.n_heads));
  return launch(kernel, grid, dim3(kWarps * 32), tile_smem_bytes(a.head_dim), at, a);
}

template <int kPerLane>
cudaError_t launch_for_cache(const LaunchConfig& at, const AttentionArgs& a) {
  if (a.cache == CacheType::kF16) return launch_for<kPerLane, __half>(at, a);
  if (a.cache == CacheType::kQ8_0) return launch_for<kPerLane, Q8_0Cache>(at, a);
  return launch_for<kPerLane, float>(at, a);
}

}  // namespace

cudaError_t launch_tiled_attention(const LaunchConfig& at, const AttentionArgs& args) {
  if (args.n_tokens == 0) return cudaSuccess;
  if (args.head_dim > kMaxTiledHeadDim) return cudaErrorInvalidValue;
  if (args.head_dim <= 32) return launch_for_cache<1>(at, args);
  if (args.head_dim <= 64) return launch_for_cache<2>(at, args);
  return launch_for_cache<4>(at, args);
}

}  // namespace duet::cuda
