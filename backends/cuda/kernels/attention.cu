// attention.cu — causal attention of query rows over the KV cache (the
// last AttentionArgs::window positions in a sliding-window layer), for
// decode (one row per sequence) and for prompt chunks too short for the
// tiles of prefill_attention.cu (or every row, in batch-invariant mode).
//
// One block per (row, query head). Its warps split the visible positions in
// tiles of 32 (warp w takes tiles w, w + kWarps, ...): in a tile each lane
// scores one position (q·k over head_dim), the warp updates a running max
// and sum (online softmax) and accumulates the softmax-weighted V rows, each
// lane owning head dimensions lane, lane + 32, .... The warps' partial
// results are then merged in shared memory. Scores and sums are f32.
// Positions are found through the block table, so contiguous and paged
// caches are read alike, and nothing that changes between decode steps is a
// launch parameter (a CUDA graph replays this launch unchanged). In a decode
// step the kernel also stores the new K/V row itself (AttentionArgs::k_new),
// one launch fewer per layer. The cache holds f32, f16 or q8_0 rows
// (CacheType); f16 and q8_0 elements are widened to f32 as they are read.
#include <cuda_fp16.h>

#include <cmath>
#include <type_traits>

#include "cache_row.cuh"
#include "common.cuh"

namespace duet::cuda {
namespace {

template <int kWarps, int kPerLane, typename CacheT>
__global__ void attention_kernel(AttentionArgs a) {
  constexpr bool kF32Cache = std::is_same_v<CacheT, float>;
  wait_for_previous_kernel();
  extern __shared__ float smem[];
  const int hd = a.head_dim;
  float* q_s = smem;              // [hd] the query, pre-multiplied by scale
  float* max_s = q_s + hd;        // [kWarps]
  float* sum_s = max_s + kWarps;  // [kWarps]
  float* acc_s = sum_s + kWarps;  // [kWarps][hd]

  const int64_t row = a.first_row + static_cast<int64_t>(blockIdx.x);
  const int head = static_cast<int>(blockIdx.y);
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int kv_head = head / (a.n_heads / a.n_kv_heads);
  const int64_t slot_floats = static_cast<int64_t>(a.n_kv_heads) * hd;  // elements of a slot
  using Row = CacheRow<CacheT>;

  const float* q = a.q + (row * a.n_heads + head) * hd;
  for (int d = static_cast<int>(threadIdx.x); d < hd; d += kWarps * 32) q_s[d] = q[d] * a.scale;

  const int last = a.row_position[row];  // this row sees positions [first, last]
  const int first = a.window > 0 ? max(0, last - a.window + 1) : 0;
  // With splits, this block takes the stretch [start, end) of them (see
  // AttentionArgs::splits); without, all of them.
  const int split = static_cast<int>(blockIdx.z);
  const int start = max(first, split * a.split_positions);
  const int end =
      a.splits > 1 ? min(last + 1, split * a.split_positions + a.split_positions) : last + 1;
  const int32_t* table = a.block_tables + a.row_table[row];
  const int bt = a.block_tokens;
  const bool vec4 = hd % 4 == 0;
  // A decode row's newest position comes from this step's K/V (see
  // AttentionArgs); the first query head of each group stores it.
  // (launch_attention refuses k_new with another cache than f32.)
  const bool fresh = kF32Cache && a.k_new != nullptr;
  const int64_t new_offset = row * slot_floats + static_cast<int64_t>(kv_head) * hd;
  if constexpr (kF32Cache) {
    if (fresh && split == 0 && head % (a.n_heads / a.n_kv_heads) == 0) {
      const int64_t slot_offset =
          static_cast<int64_t>(a.row_slot[row]) * slot_floats + static_cast<int64_t>(kv_head) * hd;
      for (int d = static_cast<int>(threadIdx.x); d < hd; d += kWarps * 32) {
        static_cast<float*>(a.k_cache)[slot_offset + d] = a.k_new[new_offset + d];
        static_cast<float*>(a.v_cache)[slot_offset + d] = a.v_new[new_offset + d];
      }
    }
  }
  // A stretch outside this row's positions (the whole block): the merge
  // reads only the stretches from first's to last's.
  if (start >= end) return;
  __syncthreads();

  float acc[kPerLane] = {};
  float run_max = -INFINITY;
  float run_sum = 0.0f;
  // Tiles start at `start` and stop at `end`, so a tile never spans two
  // stretches.
  for (int t0 = start + warp * 32; t0 < end; t0 += kWarps * 32) {
    const int p = t0 + lane;
    float score = -INFINITY;
    typename Row::Ptr v_row = nullptr;  // position p's V head
    if (p < end) {
      typename Row::Ptr k = nullptr;
      if constexpr (kF32Cache) {
        if (fresh && p == last) {
          k = a.k_new + new_offset;
          v_row = a.v_new + new_offset;
        }
      }
      if (k == nullptr) {
        const int64_t slot = static_cast<int64_t>(table[p / bt]) * bt + p % bt;
        const int64_t head_offset = static_cast<int64_t>(kv_head) * hd;
        k = Row::head(a.k_cache, slot, slot_floats, head_offset);
        v_row = Row::head(a.v_cache, slot, slot_floats, head_offset);
      }
      float dot = 0.0f;
      if (vec4) {
        // Unrolled to the largest head_dim of this instantiation, so all of
        // the row's loads are in flight at once rather than one at a time.
#pragma unroll
        for (int c = 0; c < 8 * kPerLane; ++c) {
          if (4 * c < hd) {
            const float4 kk = Row::get4(k, 4 * c);
            dot += q_s[4 * c] * kk.x + q_s[4 * c + 1] * kk.y + q_s[4 * c + 2] * kk.z +
                   q_s[4 * c + 3] * kk.w;
          }
        }
      } else {
        for (int d = 0; d < hd; ++d) dot += q_s[d] * Row::get(k, d);
      }
      score = dot;
    }
    // The tile's first position is always visible, so new_max is finite and
    // the first rescale is exp(-inf) = 0.
    const float new_max = fmaxf(run_max, warp_max(score));
    const float rescale = expf(run_max - new_max);
    const float weight = p < end ? expf(score - new_max) : 0.0f;
    run_sum = run_sum * rescale + warp_sum(weight);
#pragma unroll
    for (int c = 0; c < kPerLane; ++c) acc[c] *= rescale;
    // Unrolled for the same reason: the V rows of the tile load together.
    const int visible = min(32, end - t0);
#pragma unroll
    for (int j = 0; j < 32; ++j) {
      const float w = __shfl_sync(0xffffffffu, weight, j);
      const auto v_bits = __shfl_sync(0xffffffffu, reinterpret_cast<unsigned long long>(v_row), j);
      if (j < visible) {
        const auto v = reinterpret_cast<typename Row::Ptr>(v_bits);
#pragma unroll
        for (int c = 0; c < kPerLane; ++c) {
          const int d = lane + 32 * c;
          if (d < hd) acc[c] += w * Row::get(v, d);
        }
      }
    }
    run_max = new_max;
  }

  if (lane == 0) {
    max_s[warp] = run_max;
    sum_s[warp] = run_sum;
  }
#pragma unroll
  for (int c = 0; c < kPerLane; ++c) {
    const int d = lane + 32 * c;
    if (d < hd) acc_s[warp * hd + d] = acc[c];
  }
  __syncthreads();
  // Warp 0 always saw position `start`, so the overall max is finite; a warp
  // that saw nothing has max -inf and sum 0 and contributes exp(-inf) = 0.
  float total_max = -INFINITY;
  for (int w = 0; w < kWarps; ++w) total_max = fmaxf(total_max, max_s[w]);
  float total_sum = 0.0f;
  for (int w = 0; w < kWarps; ++w) total_sum += sum_s[w] * expf(max_s[w] - total_max);
  if (a.splits > 1) {
    // This stretch's max, sum and unnormalised output, for merge_splits_kernel.
    float* part = a.partials + ((row * a.n_heads + head) * a.splits + split) * (hd + 2);
    if (threadIdx.x == 0) {
      part[0] = total_max;
      part[1] = total_sum;
    }
    for (int d = static_cast<int>(threadIdx.x); d < hd; d += kWarps * 32) {
      float o = 0.0f;
      for (int w = 0; w < kWarps; ++w) o += acc_s[w * hd + d] * expf(max_s[w] - total_max);
      part[2 + d] = o;
    }
    return;
  }
  float* out = a.out + (row * a.n_heads + head) * hd;
  for (int d = static_cast<int>(threadIdx.x); d < hd; d += kWarps * 32) {
    float o = 0.0f;
    for (int w = 0; w < kWarps; ++w) o += acc_s[w * hd + d] * expf(max_s[w] - total_max);
    out[d] = o / total_sum;
  }
}

// One block per (row, head): merges the stretches its row reached, in
// order, as the warps of one block are merged above.
__global__ void merge_splits_kernel(AttentionArgs a) {
  wait_for_previous_kernel();
  const int64_t row = blockIdx.x;
  const int head = static_cast<int>(blockIdx.y);
  const int hd = a.head_dim;
  // The stretches holding the row's positions, [first, last] (see
  // attention_kernel): only they wrote partials.
  const int last = a.row_position[row];
  const int first = a.window > 0 ? max(0, last - a.window + 1) : 0;
  const int from = first / a.split_positions;
  const int used = last / a.split_positions + 1;
  const float* parts = a.partials + (row * a.n_heads + head) * a.splits * (hd + 2);
  float total_max = -INFINITY;
  for (int s = from; s < used; ++s) total_max = fmaxf(total_max, parts[s * (hd + 2)]);
  float total_sum = 0.0f;
  for (int s = from; s < used; ++s)
    total_sum += parts[s * (hd + 2) + 1] * expf(parts[s * (hd + 2)] - total_max);
  float* out = a.out + (row * a.n_heads + head) * hd;
  for (int d = static_cast<int>(threadIdx.x); d < hd; d += static_cast<int>(blockDim.x)) {
    float o = 0.0f;
    for (int s = from; s < used; ++s)
      o += parts[s * (hd + 2) + 2 + d] * expf(parts[s * (hd + 2)] - total_max);
    out[d] = o / total_sum;
  }
}

template <int kWarps, int kPerLane>
cudaError_t launch_with(const LaunchConfig& at, const AttentionArgs& a) {
  const size_t smem = sizeof(float) * (static_cast<size_t>(a.head_dim) * (kWarps + 1) + 2 * kWarps);
  const dim3 grid(static_cast<unsigned int>(a.n_tokens), static_cast<unsigned int>(a.n_heads),
                  static_cast<unsigned int>(a.splits));
  if (a.cache == CacheType::kF16)
    return launch(attention_kernel<kWarps, kPerLane, __half>, grid, dim3(kWarps * 32), smem, at, a);
  if (a.cache == CacheType::kQ8_0)
    return launch(attention_kernel<kWarps, kPerLane, Q8_0Cache>, grid, dim3(kWarps * 32), smem, at,
                  a);
  return launch(attention_kernel<kWarps, kPerLane, float>, grid, dim3(kWarps * 32), smem, at, a);
}

// Few rows (decode) get more warps per block, to spread a long context over
// more of the device (a decode step has only n_heads blocks); many rows
// (prefill) fill the device with blocks anyway.
template <int kWarps>
cudaError_t launch_for_head_dim(const LaunchConfig& at, const AttentionArgs& a) {
  if (a.head_dim <= 32) return launch_with<kWarps, 1>(at, a);
  if (a.head_dim <= 64) return launch_with<kWarps, 2>(at, a);
  if (a.head_dim <= 128) return launch_with<kWarps, 4>(at, a);
  return launch_with<kWarps, 8>(at, a);
}

}  // namespace

cudaError_t launch_attention(const LaunchConfig& at, const AttentionArgs& args) {
  if (args.n_tokens == 0) return cudaSuccess;
  if (args.head_dim > kMaxAttentionHeadDim || args.n_kv_heads <= 0 || args.window < 0 ||
      args.n_heads % args.n_kv_heads != 0 ||
      (args.cache != CacheType::kF32 && args.k_new != nullptr) ||
      (args.cache == CacheType::kQ8_0 && args.head_dim % kQ8Block != 0)) {
    return cudaErrorInvalidValue;
  }
  if (args.tiled) {
    if (args.k_new != nullptr || args.splits > 1 || args.batch_invariant) {
      return cudaErrorInvalidValue;
    }
    return launch_tiled_attention(at, args);
  }
  if (args.splits > 1) {
    if (args.partials == nullptr || args.batch_invariant || args.first_row != 0 ||
        args.splits > kMaxAttentionSplits || args.n_tokens > kMaxSplitRows ||
        args.split_positions <= 0 || args.split_positions % 32 != 0)
      return cudaErrorInvalidValue;
    // Many small blocks: four warps over each stretch.
    if (const cudaError_t e = launch_for_head_dim<4>(at, args); e != cudaSuccess) return e;
    const int threads = min(256, (args.head_dim + 31) / 32 * 32);
    const dim3 grid(static_cast<unsigned int>(args.n_tokens),
                    static_cast<unsigned int>(args.n_heads));
    return launch(merge_splits_kernel, grid, dim3(static_cast<unsigned int>(threads)), 0, at, args);
  }
  if (args.n_tokens <= 8 || args.batch_invariant) return launch_for_head_dim<16>(at, args);
  return launch_for_head_dim<4>(at, args);
}

}  // namespace duet::cuda
