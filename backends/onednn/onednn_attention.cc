#include "onednn_attention.h"

#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <tuple>
#include <utility>

#include "duet/error.h"
#include "kernels/kv_tiles.h"
#include "kernels/prefetch.h"
#include "onednn_kv_cache.h"

namespace duet::onednn {
namespace {

constexpr const char* kWho = "attention 'full' of backend 'onednn'";

// Sequences with at least this many rows in a step go through GEMM tiles of
// kTileRows query rows; the rows of shorter ones are split into stretches.
constexpr int32_t kMinTiledRows = 16;
constexpr int32_t kTileRows = 32;
// A decode row's positions are split into stretches of at least this many,
// so that merging partials and the GEMM calls' overhead stay small.
constexpr int32_t kMinStretch = 256;
// Batch-invariant mode: stretch c of every row covers the positions of
// [c * kInvariantStretch, (c + 1) * kInvariantStretch) that it sees (its
// window may begin inside a stretch), and the stretches of
// rows run as tasks of their own only while the step has fewer (row, KV
// head) pairs than this many per thread.
constexpr int32_t kInvariantStretch = 256;
constexpr int64_t kInvariantPairsPerThread = 4;
// The slots of the next run of a decode row's positions prefetched while
// one run is attended, and to which cache level its keys and values go.
constexpr int64_t kPrefetchSlots = 16;
constexpr auto kPrefetchKeys = detail::CacheLevel::kL1;
constexpr auto kPrefetchValues = detail::CacheLevel::kL2;

// A run of cache positions [begin, end) whose slots are consecutive from
// `slot`.
struct Run {
  int32_t begin;
  int32_t end;
  int64_t slot;
};

// The run of [p, end) that starts at p: to the end of p's block and, when
// `join`, on over the blocks whose slots follow on.
Run run_from(const std::vector<int32_t>& table, int32_t block, int32_t p, int32_t end, bool join) {
  const int32_t b = p / block;
  int32_t run_end = std::min(end, (b + 1) * block);
  while (join && run_end < end &&
         table[static_cast<size_t>(run_end / block)] ==
             table[static_cast<size_t>(b)] + run_end / block - b) {
    run_end = std::min(end, run_end + block);
  }
  return {p, run_end, int64_t{table[static_cast<size_t>(b)]} * block + p % block};
}

// Calls fn(first_position, end_position, first_slot) for each run of
// positions in [begin, end) that lie in consecutive cache slots.
template <typename Fn>
void for_each_run(const std::vector<int32_t>& table, int32_t block, int32_t begin, int32_t end,
                  const Fn& fn) {
  for (int32_t p = begin; p < end;) {
    const Run r = run_from(table, block, p, end, /*join=*/true);
    fn(r.begin, r.end, r.slot);
    p = r.end;
  }
}

// Calls fn(first_position, end_position, first_slot) for each run of
// [begin, end) — joined over consecutive slots, or (!join, batch-invariant
// mode) cut at every block boundary, wherever the blocks lie — calling
// ahead(next) first with the run after it, if any, so that the next run's
// cache lines are on their way while fn reads these. (A paged cache's
// blocks are scattered, so the kernels' own prefetches, which run ahead
// within a run, never reach the next one.)
template <typename Ahead, typename Fn>
void for_each_run_ahead(const std::vector<int32_t>& table, int32_t block, int32_t begin,
                        int32_t end, bool join, const Ahead& ahead, const Fn& fn) {
  if (begin >= end) return;
  Run r = run_from(table, block, begin, end, join);
  for (;;) {
    const bool last = r.end >= end;
    Run next{};
    if (!last) {
      next = run_from(table, block, r.end, end, join);
      ahead(next);
    }
    fn(r.begin, r.end, r.slot);
    if (last) return;
    r = next;
  }
}

// The first position a row at `position` sees: 0, or the start of its
// window (AttentionSpec::window).
int32_t window_start(const AttentionSpec& spec, int32_t position) {
  return spec.window > 0 ? std::max(0, position - spec.window + 1) : 0;
}

// Positions the last row of `seq` in this step sees.
int32_t sequence_seen(const StepBatch& step, const SequenceStep& seq) {
  return step.positions[static_cast<size_t>(seq.first_token + seq.n_tokens - 1)] + 1;
}

// The first position any row of `seq` in this step sees.
int32_t sequence_start(const AttentionSpec& spec, const StepBatch& step, const SequenceStep& seq) {
  return window_start(spec, step.positions[static_cast<size_t>(seq.first_token)]);
}

// C = alpha · op(A) · op(B) + beta · C, row-major, on the calling thread.
void sgemm(char transb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  const dnnl_status_t s = dnnl_sgemm('N', transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  if (s != dnnl_success) {
    throw Error(ErrorKind::kPlugin,
                "oneDNN sgemm in attention failed with dnnl_status " + std::to_string(s));
  }
}

}  // namespace

OnednnAttention::OnednnAttention(const AttentionSpec& spec, std::shared_ptr<ThreadPool> pool,
                                 CpuPath path, bool batch_invariant)
    : spec_(spec),
      pool_(std::move(pool)),
      path_(path),
      kernels_(vector_kernels(path)),
      batch_invariant_(batch_invariant) {}

namespace {

// The kernels' rule on top of check_attention_geometry().
Support check_head_dim(const AttentionSpec& spec) {
  Support s;
  if (spec.head_dim <= 0 || spec.head_dim % 16 != 0) {
    s.reasons.push_back(std::string(kWho) + " needs head_dim to be a multiple of 16, not " +
                        std::to_string(spec.head_dim) + "; use backend 'reference' for this model");
  }
  return s;
}

}  // namespace

Support OnednnAttention::check_spec(const AttentionSpec& spec) {
  // Against a cache of its own geometry, only the head counts can fail.
  KVCacheSpec own;
  own.n_kv_heads = spec.n_kv_heads;
  own.head_dim = spec.head_dim;
  Support s = check_attention_geometry(spec, own, kWho);
  s.merge(check_head_dim(spec));
  return s;
}

Support OnednnAttention::check(const KVCacheSpec& kv) const {
  Support s = check_kv_rows(kv, "backend 'onednn'", {DType::kF32, DType::kF16, DType::kQ8_0});
  s.merge(check_attention_geometry(spec_, kv, kWho));
  s.merge(check_head_dim(spec_));
  s.merge(check_attention_window(spec_, kWho));
  return s;
}

void OnednnAttention::plan(const StepBatch& step) {
  tasks_.clear();
  const int32_t n_kv = spec_.n_kv_heads;
  const int64_t hd = spec_.head_dim;
  const int32_t threads = pool_->threads();
  int64_t per_thread = 0;
  // Rows of the step that go through stretches rather than GEMM tiles.
  int64_t stretch_rows = 0;
  for (const SequenceStep& seq : step.sequences) {
    if (seq.n_tokens < kMinTiledRows) stretch_rows += seq.n_tokens;
  }
  for (const SequenceStep& seq : step.sequences) {
    const int32_t first = seq.first_token, last = seq.first_token + seq.n_tokens;
    if (seq.n_tokens >= kMinTiledRows) {
      for (int32_t row = first; row < last; row += kTileRows) {
        const int32_t row_end = std::min(last, row + kTileRows);
        // run_tile's scores: its rows by the positions they see.
        const int64_t seen = step.positions[static_cast<size_t>(row_end - 1)] + 1;
        const int64_t lo = window_start(spec_, step.positions[static_cast<size_t>(row)]);
        per_thread = std::max(per_thread, (row_end - row) * (seen - lo));
        for (int32_t g = 0; g < n_kv; ++g)
          tasks_.push_back(Task{&seq, g, 1, row, row_end, 0, 0, true, false});
      }
      continue;
    }
    // Split a row only as far as balancing the threads needs (two tasks per
    // thread): not at all when the step's rows are that many already (16
    // sequences decoding: one task per row, 2% faster than one per KV
    // head), else into stretches of positions when it sees enough of them,
    // otherwise by KV heads.
    const int32_t wanted =
        stretch_rows >= 2 * threads ? 1 : (2 * threads + seq.n_tokens - 1) / seq.n_tokens;
    for (int32_t row = first; row < last; ++row) {
      const int32_t seen = step.positions[static_cast<size_t>(row)] + 1;
      const int32_t lo = window_start(spec_, seen - 1);
      const int32_t n = seen - lo;
      const int32_t stretches = std::max(1, std::min(wanted, n / kMinStretch));
      // A stretch's scores, for all query heads, and attend's staging.
      per_thread = std::max(
          per_thread, int64_t{spec_.n_heads} * ((n + stretches - 1) / stretches + hd) + 16 * hd);
      if (stretches == 1) {
        const int32_t parts = std::min(n_kv, wanted);
        for (int32_t i = 0; i < parts; ++i) {
          const int32_t g0 = n_kv * i / parts, g1 = n_kv * (i + 1) / parts;
          tasks_.push_back(Task{&seq, g0, g1 - g0, row, row + 1, lo, seen, false, true});
        }
        continue;
      }
      for (int32_t c = 0; c < stretches; ++c) {
        tasks_.push_back(
            Task{&seq, 0, n_kv, row, row + 1, lo + static_cast<int32_t>(int64_t{n} * c / stretches),
                 lo + static_cast<int32_t>(int64_t{n} * (c + 1) / stretches), false, false});
      }
    }
  }
  scratch_floats_ = per_thread;
  states_.resize(tasks_.size() * static_cast<size_t>(spec_.n_heads * (2 + hd)));
  scratch_.resize(static_cast<size_t>(threads * scratch_floats_));
}

void OnednnAttention::plan_invariant(const StepBatch& step) {
  tasks_.clear();
  const int32_t n_kv = spec_.n_kv_heads;
  const int32_t group = spec_.n_heads / n_kv;
  const int64_t hd = spec_.head_dim;
  const int32_t threads = pool_->threads();
  // Splitting a row's stretches into tasks only spreads work over threads;
  // the arithmetic is the same either way. Their partials then wait in
  // states_ until all are done, so only few rows are split.
  const bool split =
      static_cast<int64_t>(step.positions.size()) * n_kv < kInvariantPairsPerThread * threads;
  int64_t most_stretches = 1;
  for (const SequenceStep& seq : step.sequences) {
    for (int32_t row = seq.first_token; row < seq.first_token + seq.n_tokens; ++row) {
      const int32_t seen = step.positions[static_cast<size_t>(row)] + 1;
      const int32_t lo = window_start(spec_, seen - 1);
      // Stretches c0..c1 - 1 hold the row's positions [lo, seen).
      const int32_t c0 = lo / kInvariantStretch;
      const int32_t c1 = (seen + kInvariantStretch - 1) / kInvariantStretch;
      most_stretches = std::max<int64_t>(most_stretches, c1 - c0);
      for (int32_t g = 0; g < n_kv; ++g) {
        if (!split || c1 - c0 == 1) {
          tasks_.push_back(Task{&seq, g, 1, row, row + 1, lo, seen, false, true});
          continue;
        }
        for (int32_t c = c0; c < c1; ++c) {
          tasks_.push_back(Task{&seq, g, 1, row, row + 1, std::max(lo, c * kInvariantStretch),
                                std::min(seen, (c + 1) * kInvariantStretch), false, false});
        }
      }
    }
  }
  state_floats_ = group * (2 + hd);
  // A run's scores and attend's staging (VectorKernels::attend), then the
  // partials of a whole task's stretches.
  scratch_floats_ = group * (kInvariantStretch + hd) + 16 * hd + most_stretches * state_floats_;
  states_.resize(split ? tasks_.size() * static_cast<size_t>(state_floats_) : 0);
  scratch_.resize(static_cast<size_t>(threads * scratch_floats_));
  thread_parts_.resize(static_cast<size_t>(threads));
  for (std::vector<SoftmaxPart>& parts : thread_parts_) {
    parts.reserve(static_cast<size_t>(most_stretches));
  }
}

void OnednnAttention::gather(const LayerCache& cache, const std::vector<int32_t>& table,
                             int32_t first_head, int32_t heads, int32_t begin, int32_t end,
                             float* k_out, float* v_out) const {
  const int64_t hd = spec_.head_dim;
  const int64_t kv_row = int64_t{spec_.n_kv_heads} * hd;
  const int64_t offset = int64_t{first_head} * hd;
  const int64_t width = int64_t{heads} * hd;
  for_each_run(table, cache.block_tokens, begin, end, [&](int32_t p0, int32_t p1, int64_t slot) {
    const int64_t n = p1 - p0;
    float* kd = k_out + int64_t{p0 - begin} * width;
    float* vd = v_out + int64_t{p0 - begin} * width;
    const uint8_t* k = static_cast<const uint8_t*>(cache.k) + slot * cache.slot_bytes;
    const uint8_t* v = static_cast<const uint8_t*>(cache.v) + slot * cache.slot_bytes;
    std::vector<uint8_t> untiled;
    if (cache.tiled) {
      // The run's rows moved out of the tiles, then converted as rows are.
      untiled.resize(static_cast<size_t>(2 * n * cache.slot_bytes));
      uint8_t* rows = untiled.data();
      for (const auto& [part, base, out] :
           {std::tuple{TilePart::kKeys, cache.k, rows},
            std::tuple{TilePart::kValues, cache.v, rows + n * cache.slot_bytes}}) {
        for (int64_t p = 0; p < n; ++p) {
          get_tile_row(cache.dtype, part,
                       static_cast<const uint8_t*>(base) + tile_offset(slot + p, cache.slot_bytes),
                       tile_lane(slot + p), spec_.n_kv_heads, spec_.head_dim,
                       out + p * cache.slot_bytes);
        }
      }
      k = rows;
      v = rows + n * cache.slot_bytes;
    }
    if (cache.dtype == DType::kF16) {
      kernels_.widen_f16(reinterpret_cast<const uint16_t*>(k) + offset, kv_row, n, width, kd);
      kernels_.widen_f16(reinterpret_cast<const uint16_t*>(v) + offset, kv_row, n, width, vd);
      return;
    }
    if (cache.dtype == DType::kQ8_0) {
      // q8_0 blocks never span heads: the first head starts a block.
      const int64_t head = first_head * cache_head_bytes(cache.dtype, spec_.head_dim);
      for (int64_t p = 0; p < n; ++p) {
        kernels_.dequantize(DType::kQ8_0, k + p * cache.slot_bytes + head, kd + p * width, width);
        kernels_.dequantize(DType::kQ8_0, v + p * cache.slot_bytes + head, vd + p * width, width);
      }
      return;
    }
    for (int64_t p = 0; p < n; ++p) {
      const auto bytes = sizeof(float) * static_cast<size_t>(width);
      std::memcpy(kd + p * width, reinterpret_cast<const float*>(k) + offset + p * kv_row, bytes);
      std::memcpy(vd + p * width, reinterpret_cast<const float*>(v) + offset + p * kv_row, bytes);
    }
  });
}

void OnednnAttention::gather_tiled(const StepBatch& step, const LayerCache& cache) {
  const int64_t kv_row = int64_t{spec_.n_kv_heads} * spec_.head_dim;
  shared_offset_.assign(step.sequences.size(), -1);
  int64_t floats = 0;
  for (size_t i = 0; i < step.sequences.size(); ++i) {
    const SequenceStep& seq = step.sequences[i];
    if (seq.n_tokens < kMinTiledRows) continue;
    const int32_t start = sequence_start(spec_, step, seq), seen = sequence_seen(step, seq);
    int runs = 0;
    for_each_run(seq.block_table, cache.block_tokens, start, seen,
                 [&](int32_t, int32_t, int64_t) { ++runs; });
    if (cache.dtype == DType::kF32 && runs == 1) continue;  // read in place
    shared_offset_[i] = floats;
    floats += 2 * int64_t{seen - start} * kv_row;
  }
  shared_.resize(static_cast<size_t>(floats));
  for (size_t i = 0; i < step.sequences.size(); ++i) {
    if (shared_offset_[i] < 0) continue;
    const SequenceStep& seq = step.sequences[i];
    const int32_t start = sequence_start(spec_, step, seq), seen = sequence_seen(step, seq);
    float* k = shared_.data() + shared_offset_[i];
    float* v = k + int64_t{seen - start} * kv_row;
    pool_->parallel_for(seen - start, 64, [&](int64_t begin, int64_t end, int) {
      gather(cache, seq.block_table, 0, spec_.n_kv_heads, start + static_cast<int32_t>(begin),
             start + static_cast<int32_t>(end), k + begin * kv_row, v + begin * kv_row);
    });
  }
}

void OnednnAttention::run_tile(const Task& task, const StepBatch& step, const LayerCache& cache,
                               const float* q, float* out, int thread) {
  const int64_t hd = spec_.head_dim;
  const int32_t group = spec_.n_heads / spec_.n_kv_heads;
  const int64_t q_row = int64_t{spec_.n_heads} * hd;
  const int64_t rows = task.row_end - task.row;
  const int32_t seen = step.positions[static_cast<size_t>(task.row_end - 1)] + 1;
  // The tile's rows see positions [lo, seen) between them (its first row's
  // window on), each row a part of that: `width` scores per row.
  const int32_t lo = window_start(spec_, step.positions[static_cast<size_t>(task.row)]);
  const int32_t width = seen - lo;
  float* scores = scratch_.data() + thread * scratch_floats_;  // [rows, width]
  // Keys and values of positions [start, seen) of the sequence, gathered
  // once for all its tiles, or, for a run of f32 slots, the cache itself.
  const int64_t kv_row = int64_t{spec_.n_kv_heads} * hd;
  const int64_t shared = shared_offset_[static_cast<size_t>(task.seq - step.sequences.data())];
  const int32_t start = sequence_start(spec_, step, *task.seq);
  const int64_t start_slot =
      int64_t{task.seq->block_table[static_cast<size_t>(start / cache.block_tokens)]} *
          cache.block_tokens +
      start % cache.block_tokens;
  const float* k = shared >= 0 ? shared_.data() + shared
                               : static_cast<const float*>(cache.k) + start_slot * kv_row;
  const float* v = shared >= 0 ? k + int64_t{sequence_seen(step, *task.seq) - start} * kv_row
                               : static_cast<const float*>(cache.v) + start_slot * kv_row;
  const int64_t from = int64_t{lo - start} * kv_row + int64_t{task.kv_head} * hd;
  const Gathered kv{k + from, v + from, kv_row};
  for (int32_t h = 0; h < group; ++h) {
    const int64_t head = (int64_t{task.kv_head} * group + h) * hd;
    sgemm('T', rows, width, hd, spec_.scale, q + task.row * q_row + head, q_row, kv.k, kv.ld, 0.0f,
          scores, width);
    for (int64_t i = 0; i < rows; ++i) {
      // Row i sees [its window's start, its position]: zeros before.
      const int32_t position = step.positions[static_cast<size_t>(task.row + i)];
      const int32_t skip = window_start(spec_, position) - lo;
      float* row = scores + i * width;
      std::fill(row, row + skip, 0.0f);
      kernels_.softmax(row + skip, position + 1 - lo - skip, width - skip);
    }
    sgemm('N', rows, hd, width, 1.0f, scores, width, kv.v, kv.ld, 0.0f,
          out + task.row * q_row + head, q_row);
  }
}

void OnednnAttention::run_stretch(const Task& task, size_t index, const LayerCache& cache,
                                  const float* q, float* out, int thread) {
  const int32_t hd = spec_.head_dim;
  const int32_t group = spec_.n_heads / spec_.n_kv_heads;
  const int32_t heads = task.kv_heads * group;  // query heads of this task
  const int64_t first_head = int64_t{task.kv_head} * group;
  const int64_t q_row = int64_t{spec_.n_heads} * hd;
  float* part = states_.data() + index * static_cast<size_t>(spec_.n_heads * (2 + hd));
  const SoftmaxPart state{part, part + heads, part + 2 * heads};
  std::fill(state.max, state.max + heads, -INFINITY);
  std::fill(state.sum, state.sum + heads, 0.0f);
  std::fill(state.acc, state.acc + int64_t{heads} * hd, 0.0f);
  float* scores = scratch_.data() + thread * scratch_floats_;
  const float* qr = q + task.row * q_row + first_head * hd;
  // Decode is bound by reading the cache: the keys and values are read in
  // place, once, in order, straight from the slots (widened in registers).
  attend_runs(task, cache, qr, task.begin, task.end, /*join=*/true, scores, state);
  if (task.whole) kernels_.merge(&state, 1, heads, hd, out + task.row * q_row + first_head * hd);
}

void OnednnAttention::attend_runs(const Task& task, const LayerCache& cache, const float* qr,
                                  int32_t begin, int32_t end, bool join, float* scores,
                                  const SoftmaxPart& state) const {
  for_each_run_ahead(
      task.seq->block_table, cache.block_tokens, begin, end, join,
      [&](const Run& next) { prefetch_run(task, cache, next.slot, next.end - next.begin); },
      [&](int32_t p0, int32_t p1, int64_t slot) {
        attend_run(task, cache, qr, p0, p1, slot, scores, state);
      });
}

void OnednnAttention::prefetch_run(const Task& task, const LayerCache& cache, int64_t slot,
                                   int64_t n) const {
  // The first kPrefetchSlots slots only: the kernels prefetch on ahead of
  // themselves within a run.
  n = std::min<int64_t>(n, kPrefetchSlots);
  const auto* k = static_cast<const uint8_t*>(cache.k);
  const auto* v = static_cast<const uint8_t*>(cache.v);
  if (cache.tiled) {
    const int64_t head_bytes = tile_head_bytes(cache.dtype, spec_.head_dim);
    const int64_t tile_bytes = kTileSlots * cache.slot_bytes;
    for (int64_t t = tile_offset(slot, cache.slot_bytes),
                 last = tile_offset(slot + n - 1, cache.slot_bytes);
         t <= last; t += tile_bytes) {
      const int64_t first = t + task.kv_head * head_bytes;
      detail::prefetch_lines<kPrefetchKeys>(k + first, task.kv_heads * head_bytes);
      detail::prefetch_lines<kPrefetchValues>(v + first, task.kv_heads * head_bytes);
    }
    return;
  }
  const int64_t head_bytes = cache_head_bytes(cache.dtype, spec_.head_dim);
  for (int64_t s = slot; s < slot + n; ++s) {
    const int64_t first = s * cache.slot_bytes + task.kv_head * head_bytes;
    detail::prefetch_lines<kPrefetchKeys>(k + first, task.kv_heads * head_bytes);
    detail::prefetch_lines<kPrefetchValues>(v + first, task.kv_heads * head_bytes);
  }
}

void OnednnAttention::attend_run(const Task& task, const LayerCache& cache, const float* qr,
                                 int32_t p0, int32_t p1, int64_t slot, float* scores,
                                 const SoftmaxPart& state) const {
  const int32_t hd = spec_.head_dim;
  const int32_t group = spec_.n_heads / spec_.n_kv_heads;
  if (cache.tiled) {
    const int64_t first = tile_offset(slot, cache.slot_bytes) +
                          task.kv_head * tile_head_bytes(cache.dtype, spec_.head_dim);
    kernels_.attend_tiles(qr, task.kv_heads, group, hd, spec_.scale, cache.dtype,
                          static_cast<const uint8_t*>(cache.k) + first,
                          static_cast<const uint8_t*>(cache.v) + first,
                          kTileSlots * cache.slot_bytes, tile_lane(slot), p1 - p0, scores, state);
    return;
  }
  const int64_t first =
      slot * cache.slot_bytes + task.kv_head * cache_head_bytes(cache.dtype, spec_.head_dim);
  kernels_.attend(qr, task.kv_heads, group, hd, spec_.scale,
                  static_cast<const uint8_t*>(cache.k) + first,
                  static_cast<const uint8_t*>(cache.v) + first, cache.dtype, cache.slot_bytes,
                  p1 - p0, scores, state);
}

void OnednnAttention::run_invariant(const Task& task, size_t index, const LayerCache& cache,
                                    const float* q, float* out, int thread) {
  const int32_t hd = spec_.head_dim;
  const int32_t group = spec_.n_heads / spec_.n_kv_heads;
  const int64_t q_row = int64_t{spec_.n_heads} * hd;
  const int64_t first_head = int64_t{task.kv_head} * group;
  float* scores = scratch_.data() + thread * scratch_floats_;
  float* states = task.whole ? scores + group * (kInvariantStretch + hd) + 16 * hd
                             : states_.data() + index * static_cast<size_t>(state_floats_);
  std::vector<SoftmaxPart>& parts = thread_parts_[static_cast<size_t>(thread)];
  parts.clear();
  const float* qr = q + task.row * q_row + first_head * hd;
  // Stretches end at multiples of kInvariantStretch, wherever the row's
  // positions (a window's) begin.
  for (int32_t s0 = task.begin; s0 < task.end;) {
    const int32_t s1 = std::min(task.end, (s0 / kInvariantStretch + 1) * kInvariantStretch);
    float* st = states + static_cast<int64_t>(parts.size()) * state_floats_;
    const SoftmaxPart state{st, st + group, st + 2 * group};
    std::fill(state.max, state.max + group, -INFINITY);
    std::fill(state.sum, state.sum + group, 0.0f);
    std::fill(state.acc, state.acc + int64_t{group} * hd, 0.0f);
    attend_runs(task, cache, qr, s0, s1, /*join=*/false, scores, state);
    parts.push_back(state);
    s0 = s1;
  }
  if (task.whole) {
    kernels_.merge(parts.data(), static_cast<int64_t>(parts.size()), group, hd,
                   out + task.row * q_row + first_head * hd);
  }
}

void OnednnAttention::merge_stretches(float* out) {
  const int32_t hd = spec_.head_dim;
  const int32_t group = spec_.n_heads / spec_.n_kv_heads;
  const int64_t q_row = int64_t{spec_.n_heads} * hd;
  for (size_t i = 0; i < tasks_.size();) {
    const Task& t = tasks_[i];
    size_t j = i + 1;
    if (!t.whole) {
      // A row's stretches for one KV head are consecutive tasks, in order.
      while (j < tasks_.size() && !tasks_[j].whole && tasks_[j].row == t.row &&
             tasks_[j].kv_head == t.kv_head) {
        ++j;
      }
      parts_.clear();
      for (size_t s = i; s < j; ++s) {
        float* st = states_.data() + s * static_cast<size_t>(state_floats_);
        parts_.push_back(SoftmaxPart{st, st + group, st + 2 * group});
      }
      kernels_.merge(parts_.data(), static_cast<int64_t>(parts_.size()), group, hd,
                     out + t.row * q_row + int64_t{t.kv_head} * group * hd);
    }
    i = j;
  }
}

void OnednnAttention::forward(int32_t layer, const StepBatch& step, const TensorView& q,
                              const TensorView& k, const TensorView& v, KVCache& kv,
                              TensorView out) {
  const int32_t hd = spec_.head_dim;
  const int64_t q_row = int64_t{spec_.n_heads} * hd;
  const DType dtype = kv.spec().dtype;
  // Store every new row first, so rows of one step see each other causally.
  kv.write(layer, step, k, v);
  KVLayerView view = kv.layer(layer);
  const auto slot_bytes = static_cast<int64_t>(view.slot_bytes);
  const bool tiled = view.tile_slots != 0;
  // The tiles OnednnKVCache keeps on this path (f16 only with its option).
  const bool readable = OnednnKVCache::tile_slots(kv.spec(), path_, {.f16 = true}) == kTileSlots;
  if (tiled && (view.tile_slots != kTileSlots || !readable)) {
    throw Error(ErrorKind::kPlugin,
                "the KV cache holds " + std::string(dtype_name(dtype)) + " in tiles of " +
                    std::to_string(view.tile_slots) +
                    " slots; attention 'full' of backend 'onednn' reads tiles of " +
                    std::to_string(kTileSlots) +
                    " slots only: f16 on the avx512 paths, q8_0 on the avx512_vnni path");
  }

  const LayerCache cache{view.k, view.v, dtype, kv.spec().block_tokens, slot_bytes, tiled};
  const float* qf = q.as<const float>();
  float* of = out.as<float>();
  if (batch_invariant_) {
    plan_invariant(step);
    pool_->parallel_tasks(static_cast<int64_t>(tasks_.size()), [&](int64_t index, int thread) {
      run_invariant(tasks_[static_cast<size_t>(index)], static_cast<size_t>(index), cache, qf, of,
                    thread);
    });
    merge_stretches(of);
    return;
  }

  plan(step);
  gather_tiled(step, cache);
  pool_->parallel_tasks(static_cast<int64_t>(tasks_.size()), [&](int64_t index, int thread) {
    const Task& task = tasks_[static_cast<size_t>(index)];
    if (task.tile) {
      run_tile(task, step, cache, qf, of, thread);
    } else {
      run_stretch(task, static_cast<size_t>(index), cache, qf, of, thread);
    }
  });

  // Rows whose positions were split into stretches: merge their partials.
  const int32_t heads = spec_.n_heads;
  const size_t state_floats = static_cast<size_t>(heads * (2 + hd));
  for (size_t i = 0; i < tasks_.size();) {
    const Task& t = tasks_[i];
    size_t j = i + 1;
    if (!t.tile && !t.whole) {
      while (j < tasks_.size() && !tasks_[j].tile && tasks_[j].row == t.row) ++j;
      parts_.clear();
      for (size_t s = i; s < j; ++s) {
        float* st = states_.data() + s * state_floats;
        parts_.push_back(SoftmaxPart{st, st + heads, st + 2 * heads});
      }
      kernels_.merge(parts_.data(), static_cast<int64_t>(parts_.size()), heads, hd,
                     of + t.row * q_row);
    }
    i = j;
  }
}

}  // namespace duet::onednn
