// onednn_attention.h — causal attention over every cached position
// ("full"), or over a row's last AttentionSpec::window of them, its matrix
// products in oneDNN f32 GEMM.
//
// A sequence with many rows in the step (a prompt chunk) is cut into tiles of
// query rows; for each tile and query head, S = scale · Q Kᵀ and O = P V are
// GEMMs over the positions the tile's rows see (from its first row's window
// start, or 0, to its last row), with a causal, windowed softmax in between. A sequence with few
// rows (decode) would give only n_kv_heads such tasks — too few for the threads and too coarse at
// thousands of cached tokens — so each of its rows is instead split into stretches of cached
// positions. A stretch reads its keys and values in place, each once,
// widening f16 or q8_0 in registers (long-context decode is bound by
// reading the cache), scores them for all query heads of a KV head's group at once, and
// folds them into softmax partials (max, sum, unnormalised output) run of
// slots by run of slots; the partials of a row's stretches are merged
// afterwards (flash decoding). Positions are read through the sequence's
// block table exactly as the reference backend reads them; tiles read a run
// of f32 slots in place, and anything else (an f16 or q8_0 cache, blocks
// out of order) is gathered once per step for all tiles of the sequence.
// A q8_0 cache in tiles (the VNNI path, kernels/kv_tiles.h) is read by
// VectorKernels::attend_tiles in decode and row by row for prompt tiles.
//
// Batch-invariant mode (BackendOptions::batch_invariant) gives up the GEMM
// tiles and the thread-dependent splits: every row, prompt or decode, is computed
// like a decode row, each KV head on its own, its positions cut into
// stretches at fixed multiples of kInvariantStretch (256) and, within a
// stretch, read in runs cut at every block boundary (not only where blocks
// happen not to be consecutive); each stretch starts from a fresh partial
// and the partials are merged in position order. So a row's arithmetic
// follows from its position, its sequence's cached keys and values, the
// spec and block_tokens alone — not from other sequences, from how many
// rows its own sequence has in the step, from where its blocks lie or from
// the number of threads (which only decides whether a task covers one
// stretch or all of a row's). It still depends on the CPU path: the same
// row on an AVX2 and an AVX-512 machine may differ in the last bits.
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
  OnednnAttention(const AttentionSpec& spec, std::shared_ptr<ThreadPool> pool, CpuPath path,
                  bool batch_invariant = false);

  // Why this attention cannot serve `spec`; empty when it can.
  static Support check_spec(const AttentionSpec& spec);

  Support check(const KVCacheSpec& kv) const override;
  void forward(int32_t layer, const StepBatch& step, const TensorView& q, const TensorView& k,
               const TensorView& v, KVCache& kv, TensorView out) override;

 private:
  // One unit of parallel work on `seq`, for the query heads of KV heads
  // [kv_head, kv_head + kv_heads). A tile covers query rows [row, row_end)
  // of one KV head and every position they see; a stretch covers positions
  // [begin, end) of the single row `row`, and is `whole` when that is every
  // position the row sees (a row split into several stretches has one task
  // per stretch, each for all KV heads). In batch-invariant mode every task
  // is a stretch task of one KV head whose [begin, end) is one stretch, or
  // all of them (`whole`: it merges them itself).
  struct Task {
    const SequenceStep* seq;
    int32_t kv_head;
    int32_t kv_heads;
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
    DType dtype;  // f32, f16 or q8_0
    int32_t block_tokens;
    int64_t slot_bytes;  // bytes of one slot's row
    bool tiled;          // in tiles (kernels/kv_tiles.h), not rows
  };

  // f32 keys and values of positions [begin, end) for some KV heads: row p
  // at k + (p - begin) * ld (and v likewise), its heads consecutive.
  struct Gathered {
    const float* k;
    const float* v;
    int64_t ld;
  };

  void plan(const StepBatch& step);
  void plan_invariant(const StepBatch& step);
  // Copies (widening f16, expanding q8_0) the keys and values of KV heads [first_head,
  // first_head + heads) at positions [begin, end) to k_out and v_out, rows
  // of heads * head_dim floats.
  void gather(const LayerCache& cache, const std::vector<int32_t>& table, int32_t first_head,
              int32_t heads, int32_t begin, int32_t end, float* k_out, float* v_out) const;
  // For each sequence cut into tiles whose keys and values are not one run
  // of f32 slots: gathers every position its rows see (from its first row's
  // window start) into shared_, once, for all of its tiles.
  void gather_tiled(const StepBatch& step, const LayerCache& cache);
  void run_tile(const Task& task, const StepBatch& step, const LayerCache& cache, const float* q,
                float* out, int thread);
  void run_stretch(const Task& task, size_t index, const LayerCache& cache, const float* q,
                   float* out, int thread);
  // Folds the task row's positions [begin, end) into `state` run by run
  // (for_each_run_ahead: runs joined over consecutive slots, or, !join, cut
  // at every block), prefetching each next run while one is attended.
  void attend_runs(const Task& task, const LayerCache& cache, const float* qr, int32_t begin,
                   int32_t end, bool join, float* scores, const SoftmaxPart& state) const;
  // Prefetches the first slots of a run of n from `slot` that `task` will
  // read next: its KV heads' keys and values.
  void prefetch_run(const Task& task, const LayerCache& cache, int64_t slot, int64_t n) const;
  // Folds positions [p0, p1) of the task's row, in consecutive slots from
  // `slot`, into `state` (attend, or attend_tiles for a tiled cache).
  void attend_run(const Task& task, const LayerCache& cache, const float* qr, int32_t p0,
                  int32_t p1, int64_t slot, float* scores, const SoftmaxPart& state) const;
  void run_invariant(const Task& task, size_t index, const LayerCache& cache, const float* q,
                     float* out, int thread);
  // Merges the partials of rows whose stretches ran as separate tasks.
  void merge_stretches(float* out);

  AttentionSpec spec_;
  std::shared_ptr<ThreadPool> pool_;
  CpuPath path_;
  const VectorKernels& kernels_;
  bool batch_invariant_;
  std::vector<Task> tasks_;
  std::vector<float> states_;       // per task: max[group], sum[group], acc[group][head_dim]
  std::vector<SoftmaxPart> parts_;  // the stretches of one row being merged
  // Batch-invariant mode, per thread: the partials of a whole task's stretches.
  std::vector<std::vector<SoftmaxPart>> thread_parts_;
  int64_t state_floats_ = 0;  // floats of one task's partial in states_
  // Per thread: a task's scores.
  std::vector<float> scratch_;
  // Per tiled sequence: keys then values of every position its rows see, or
  // offset -1 when its tiles read the cache in place.
  std::vector<float> shared_;
  std::vector<int64_t> shared_offset_;
  int64_t scratch_floats_ = 0;  // per thread
};

}  // namespace duet::onednn
