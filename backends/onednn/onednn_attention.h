// onednn_attention.h — causal attention over the cache ("flash"), its
// matrix products in oneDNN f32 GEMM.
//
// A sequence with many rows in the step (a prompt chunk) is cut into tiles of
// query rows; for each tile and query head, S = scale · Q Kᵀ and O = P V are
// GEMMs over the positions the tile's last row sees, with a causal softmax
// in between. A sequence with few rows (decode) would give only n_kv_heads
// such tasks — too few for the threads and too coarse at thousands of cached
// tokens — so each of its rows is instead split into stretches of cached
// positions. A stretch copies its slots (widening f16) in one sequential
// pass — decode is bound by reading the cache, and strided per-head passes
// read it at a fraction of the memory bandwidth — then multiplies the query
// vectors of each KV head's group at once and keeps the softmax partials
// (max, sum, unnormalised output), which are merged afterwards (flash
// decoding). Positions are read through the sequence's block table exactly
// as the reference backend reads them; a tile reads a run of f32 slots in
// place and gathers anything else (an f16 cache, blocks out of order) into a
// per-thread buffer first, once for all heads of the group.
#pragma once

#include <memory>
#include <vector>

#include "duet/attention.h"
#include "thread_pool.h"
#include "vector_kernels.h"

namespace duet::onednn {

class OnednnAttention final : public Attention {
 public:
  // REQUIRES: path ≤ hardware_cpu_path().
  OnednnAttention(const AttentionSpec& spec, std::shared_ptr<ThreadPool> pool, CpuPath path);

  // Why this attention cannot serve `spec`; empty when it can.
  static Support check_spec(const AttentionSpec& spec);

  Support check(const KVCacheSpec& kv) const override;
  void forward(int32_t layer, const StepBatch& step, const TensorView& q, const TensorView& k,
               const TensorView& v, KVCache& kv, TensorView out) override;

 private:
  // One unit of parallel work on `seq`. A tile covers query rows [row,
  // row_end) of the heads of KV head `kv_head` and every position they see;
  // a stretch covers positions [begin, end) of the single row `row` for all
  // heads, and is `whole` when that is every position the row sees.
  struct Task {
    const SequenceStep* seq;
    int32_t kv_head;  // tiles only
    int32_t row;
    int32_t row_end;  // tiles only
    int32_t begin;    // stretches only
    int32_t end;
    bool tile;
    bool whole;
  };

  // Where the cache of the current layer lives, for the tasks.
  struct LayerCache {
    const void* k;
    const void* v;
    DType dtype;  // f32 or f16
    int32_t block_tokens;
  };

  // f32 keys and values of positions [begin, end) for some KV heads: row p
  // at k + (p - begin) * ld (and v likewise), its heads consecutive.
  struct Gathered {
    const float* k;
    const float* v;
    int64_t ld;
  };

  void plan(const StepBatch& step);
  // KV heads [first_head, first_head + heads): points into the cache when
  // `in_place` and the positions are one run of f32 slots; otherwise copies
  // (widening f16) them into `buffer`, 2 * (end - begin) * heads * head_dim
  // floats.
  Gathered gather(const LayerCache& cache, const std::vector<int32_t>& table, int32_t first_head, int32_t heads,
                  int32_t begin, int32_t end, bool in_place, float* buffer) const;
  void run_tile(const Task& task, const StepBatch& step, const LayerCache& cache, const float* q, float* out,
                int thread);
  void run_stretch(const Task& task, size_t index, const LayerCache& cache, const float* q, float* out,
                   int thread);

  AttentionSpec spec_;
  std::shared_ptr<ThreadPool> pool_;
  const VectorKernels& kernels_;
  std::vector<Task> tasks_;
  std::vector<float> states_;    // per task: max[group], sum[group], acc[group][head_dim]
  std::vector<SoftmaxPart> parts_;  // the stretches of one row being merged
  // Per thread: a task's scores, then its gathered keys and values.
  std::vector<float> scratch_;
  int64_t scratch_floats_ = 0;   // per thread
};

}  // namespace duet::onednn
