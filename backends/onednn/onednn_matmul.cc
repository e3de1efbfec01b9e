#include "onednn_matmul.h"

#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>
#include <span>
#include <string>

#include "duet/error.h"

namespace duet::onednn {
namespace {

// Thread boundaries in gemv fall on multiples of this many weight rows, so
// no two threads share a cache line of the output.
constexpr int64_t kGemvGrain = 16;
// Rows a gemv thread claims at a time, from its own share first and then,
// when done, from the back of another thread's
// (ThreadPool::parallel_for_shared): for SmolLM2's Q4_1 and Q8_0 matrices
// 20-60 KiB of weights, a few microseconds of streaming, against one atomic
// compare-and-swap. In-process A/B on SmolLM2 decode: 32 rows took 1.006-
// 1.023 times as long, 128 rows 1.002-1.009.
constexpr int64_t kGemvChunk = 4 * kGemvGrain;
// Tiles (16 weight rows each) a thread claims at a time in a tiled product:
// as kGemvChunk rows.
constexpr int64_t kTileChunk = kGemvChunk / RowTiles::kRows;
// Activation rows from which quantize_rows splits them across the pool.
constexpr int64_t kParallelQuantizeRows = 4;
// GEMM panels are handed to threads as they become free, about this many
// per thread: on a shared machine one core often runs slower than another,
// and a fixed share each would leave the faster one waiting.
constexpr int64_t kTasksPerThread = 8;

// The weight types of kernels/qgemv.h.
bool gemv_supports(DType t) { return t == DType::kF32 || t == DType::kF16 || qgemv_block_type(t); }

// C[n, cols] (leading dimension ldc) = A[n, k] · B[cols, k]ᵀ, all row-major.
void sgemm_nt(int64_t n, int64_t cols, int64_t k, const float* a, const float* b, float* c,
              int64_t ldc) {
  const dnnl_status_t status = dnnl_sgemm('N', 'T', n, cols, k, 1.0f, a, k, b, k, 0.0f, c, ldc);
  if (status != dnnl_success) {
    throw Error(ErrorKind::kPlugin, "oneDNN sgemm of [" + std::to_string(n) + ", " +
                                        std::to_string(k) + "] x [" + std::to_string(cols) + ", " +
                                        std::to_string(k) + "]T failed with dnnl_status " +
                                        std::to_string(status));
  }
}

}  // namespace

Matmul::Matmul(std::shared_ptr<ThreadPool> pool, CpuPath path, const BackendOptions& options,
               std::shared_ptr<RowTilesCache> tiles)
    : pool_(std::move(pool)),
      path_(path),
      min_gemm_rows_(options.batch_invariant ? std::numeric_limits<int64_t>::max()
                                             : options.min_gemm_rows),
      min_gemm_rows_tiles_(options.batch_invariant ? std::numeric_limits<int64_t>::max()
                                                   : options.min_gemm_rows_tiles),
      min_gemm_rows_large_(options.batch_invariant ? std::numeric_limits<int64_t>::max()
                                                   : options.min_gemm_rows_large),
      min_gemm_rows_amx_(options.batch_invariant ? std::numeric_limits<int64_t>::max()
                                                 : options.min_gemm_rows_amx),
      min_tile_rows_(options.batch_invariant || !row_tiles_path(path) ? 0 : options.min_tile_rows),
      terms_(options.gemv_terms),
      amx_(options.amx && !options.batch_invariant),
      amx_bf16_(amx_ && options.amx_bf16),
      batch_invariant_(options.batch_invariant),
      kernels_(vector_kernels(path)),
      tiles_(std::move(tiles)),
      panels_(static_cast<size_t>(pool_->threads())) {}

int64_t Matmul::panel_rows(int64_t k) {
  constexpr int64_t kPanelBytes = int64_t{1} << 20;
  return std::max<int64_t>(kGemvGrain,
                           kPanelBytes / (k * int64_t{sizeof(float)}) / kGemvGrain * kGemvGrain);
}

void Matmul::run(const TensorView& x, const TensorView& w, TensorView out) {
  // Nothing to write (and no activation row to quantize, or no tile to make).
  if (x.shape[0] == 0 || w.shape[0] == 0) return;
  if (takes_tiles(x.shape[0], w)) {
    tiled(x, {&w, 1}, {&out, 1});
  } else if (x.shape[0] < min_gemm_rows_ && gemv_supports(w.dtype)) {
    gemv(x, w, out);
  } else if (batch_invariant_) {
    gemv_expanded(x, w, out);
  } else {
    gemm(x, w, out);
  }
}

void Matmul::quantize_rows(const float* x, int64_t n, int64_t k, bool derived_forms, bool for_amx) {
  // The same activations often feed several matrices in a row (a layer's
  // q, k and v; gate and up): a row whose values equal those its
  // quantization was made from, in the form asked for, is kept. Each row is
  // compared, quantized and copied in the same task, in parallel once there
  // are several: a 16-sequence decode step's rows otherwise take ~7% of the
  // step on the calling thread while the others wait, and a 512-row
  // prompt's comparisons and copies took 3-4% of prefill there.
  if (xq_.size() < static_cast<size_t>(n)) xq_.resize(static_cast<size_t>(n));
  if (quantized_.size() < static_cast<size_t>(n * k)) quantized_.resize(static_cast<size_t>(n * k));
  const int64_t kept_rows = quantized_rows_;
  quantized_rows_ = 0;  // until every row is in
  // amx_rows_ holds xq_'s rows while fresh: then only the rows that change
  // are packed again, else all of them.
  const bool repack = for_amx && (!amx_rows_fresh_ || amx_rows_.rows() != n || amx_rows_.k() != k ||
                                  amx_rows_.terms() != terms_);
  const bool was_fresh = amx_rows_fresh_;
  amx_rows_fresh_ = false;  // until every row is in
  if (repack) {
    amx_rows_.reset(n, k, terms_);
    amx_rows_.clear_padding();
  }
  const auto row_bytes = static_cast<size_t>(k) * sizeof(float);
  std::atomic<bool> changed{false};
  auto rows = [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) {
      Q8Activations& xq = xq_[static_cast<size_t>(i)];
      float* copy = quantized_.data() + i * k;
      if (i < kept_rows && xq.k() == k && (!derived_forms || xq.has_derived_forms()) &&
          std::memcmp(x + i * k, copy, row_bytes) == 0) {
        if (repack) amx_rows_.pack_row(xq, i);
        continue;
      }
      xq.quantize(x + i * k, k, path_, terms_, derived_forms);
      std::memcpy(copy, x + i * k, row_bytes);
      changed.store(true, std::memory_order_relaxed);
      if (for_amx) amx_rows_.pack_row(xq, i);
    }
  };
  if (n >= kParallelQuantizeRows) {
    // For the tile unit, eight rows a piece: a cache line of its regrouped
    // rows' scales holds eight rows', and no two threads should write one.
    pool_->parallel_for(n, for_amx ? 8 : 1, rows);
  } else {
    rows(0, n, 0);
  }
  // The AMX regrouping holds the rows of the last product that asked for
  // it, as long as no other changes xq_.
  amx_rows_fresh_ =
      for_amx || (was_fresh && !changed.load(std::memory_order_relaxed) && n == kept_rows);
  quantized_rows_ = n;
}

void Matmul::split_rows(const float* x, int64_t n, int64_t k) {
  bf16_rows_.reset(n, k);
  // Each row writes lines of its own in every tile.
  pool_->parallel_for(n, 1, [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) bf16_rows_.pack_row(x + i * k, i);
  });
}

void Matmul::gemv(const TensorView& x, const TensorView& w, TensorView out) {
  const int64_t n = x.shape[0];
  const int64_t k = x.shape[1];
  const int64_t m = w.shape[0];
  const float* xf = x.as<const float>();
  // f32 and f16 weights read x itself (their Q8Activations go unread).
  if (qgemv_block_type(w.dtype)) {
    quantize_rows(xf, n, k, /*derived_forms=*/n > 1);
  } else if (xq_.empty()) {
    xq_.resize(1);
  }
  float* y = out.as<float>();
  pool_->parallel_for_shared(m, kGemvGrain, kGemvChunk, [&](int64_t begin, int64_t end, int) {
    gemv_batch(path_, w.dtype, w.data, k, xq_.data(), xf, n, y, m, begin, end);
  });
}

bool Matmul::takes_tiles(int64_t n, const TensorView& w) const {
  const DType wtype = w.dtype;
  if (min_tile_rows_ == 0 || !row_tiles_kernel(path_, wtype)) return false;
  const bool large = w.shape[0] * w.shape[1] >= kLargeMatrixWeights;
  if (n >= (amx_ ? min_gemm_rows_amx_ : large ? min_gemm_rows_large_ : min_gemm_rows_tiles_)) {
    return false;
  }
  // Nibble, fifth-bit and six-bit tiles hold the file's bits, regrouped,
  // and q8_0's and q6_k's tiles 6-7% more: about as much to stream as the
  // gemv kernels read, so decode's single row takes them where their
  // kernel is the faster (row_tiles_from_one_row). The half-block tiles
  // (q2_k, q3_k) stream 1.5 bytes per weight, against 0.33-0.43 in the
  // file, so one row reads the file's bytes through gemv.
  return n >= min_tile_rows_ || row_tiles_from_one_row(path_, wtype);
}

void Matmul::run_shared(const TensorView& x, std::span<const TensorView> w,
                        std::span<const TensorView> out) {
  bool all_tiled = x.shape[0] > 0;
  for (const TensorView& wi : w) all_tiled = all_tiled && takes_tiles(x.shape[0], wi);
  if (all_tiled) {
    tiled(x, w, out);
    return;
  }
  for (size_t i = 0; i < w.size(); ++i) run(x, w[i], out[i]);
}

void Matmul::tiled(const TensorView& x, std::span<const TensorView> w,
                   std::span<const TensorView> out) {
  const int64_t n = x.shape[0];
  const int64_t k = x.shape[1];
  tiled_products_.clear();
  int64_t total = 0;  // tiles of all the products
  bool any_int8_amx = false;
  bool any_quantized = false;  // on the int8 products or the VNNI kernel
  bool any_bf16 = false;
  for (size_t i = 0; i < w.size(); ++i) {
    if (w[i].shape[0] == 0) continue;
    std::shared_ptr<const RowTiles> tiles =
        tiles_->get(w[i], [&](RowTiles& t, const TensorView& weights) {
          pool_->parallel_tasks(t.tiles(), [&](int64_t j, int) { t.pack(weights.data, j, j + 1); });
        });
    const bool amx = amx_ && n >= amx_min_rows(tiles->format());
    const bool bf16 = amx && amx_bf16_ && n >= amx_bf16_min_rows(tiles->format());
    any_int8_amx = any_int8_amx || (amx && !bf16);
    any_quantized = any_quantized || !bf16;
    any_bf16 = any_bf16 || bf16;
    const int64_t count = tiles->tiles();
    tiled_products_.push_back(TiledProduct{std::move(tiles), out[i].as<float>(), total, amx, bf16});
    total += count;
  }
  if (any_quantized) {
    quantize_rows(x.as<const float>(), n, k, /*derived_forms=*/false, /*for_amx=*/any_int8_amx);
  }
  if (any_bf16) split_rows(x.as<const float>(), n, k);
  // The tiles of all products in one loop; a claimed range may span two.
  pool_->parallel_for_shared(total, 1, kTileChunk, [&](int64_t begin, int64_t end, int) {
    for (const TiledProduct& p : tiled_products_) {
      const int64_t count = p.tiles->tiles();
      const int64_t b = std::max(begin, p.first) - p.first;
      const int64_t e = std::min(end, p.first + count) - p.first;
      if (b >= e) continue;
      const int64_t m = p.tiles->rows();
      if (p.bf16) {
        row_tiles_product_amx_bf16(*p.tiles, bf16_rows_, p.y, m, b, e);
      } else if (p.amx) {
        row_tiles_product_amx(*p.tiles, amx_rows_, p.y, m, b, e);
      } else {
        row_tiles_product(path_, *p.tiles, xq_.data(), n, p.y, m, b, e);
      }
    }
  });
  tiled_products_.clear();  // no tiles kept alive past their use
}

int64_t Matmul::task_rows(int64_t m) const {
  const int64_t tasks = int64_t{pool_->threads()} * kTasksPerThread;
  return std::max<int64_t>(kGemvGrain,
                           (m + tasks * kGemvGrain - 1) / (tasks * kGemvGrain) * kGemvGrain);
}

void Matmul::gemm(const TensorView& x, const TensorView& w, TensorView out) {
  const int64_t n = x.shape[0];
  const int64_t k = x.shape[1];
  const int64_t m = w.shape[0];
  const uint64_t row_bytes = *dtype_row_bytes(w.dtype, static_cast<uint64_t>(k));
  // Panels that fit the L2 cache, at most a share of the rows each.
  const int64_t panel = std::min(panel_rows(k), task_rows(m));
  const auto* wbytes = static_cast<const uint8_t*>(w.data);
  pool_->parallel_tasks((m + panel - 1) / panel, [&](int64_t i, int t) {
    const int64_t r = i * panel;
    const int64_t rows = std::min(panel, m - r);
    const float* wp = nullptr;
    if (w.dtype == DType::kF32) {
      wp = w.as<const float>() + r * k;
    } else {
      std::vector<float>& scratch = panels_[static_cast<size_t>(t)];
      scratch.resize(static_cast<size_t>(panel * k));
      // Rows are back to back: the panel is one run of elements.
      expand_weights(kernels_, w.dtype, wbytes + static_cast<uint64_t>(r) * row_bytes,
                     scratch.data(), rows * k);
      wp = scratch.data();
    }
    sgemm_nt(n, rows, k, x.as<const float>(), wp, out.as<float>() + r, m);
  });
}

void Matmul::gemv_expanded(const TensorView& x, const TensorView& w, TensorView out) {
  const int64_t n = x.shape[0];
  const int64_t k = x.shape[1];
  const int64_t m = w.shape[0];
  const uint64_t row_bytes = *dtype_row_bytes(w.dtype, static_cast<uint64_t>(k));
  // A fixed panel size; the rows of one are independent products anyway.
  const int64_t panel = panel_rows(k);
  const auto* wbytes = static_cast<const uint8_t*>(w.data);
  float* y = out.as<float>();
  pool_->parallel_tasks((m + panel - 1) / panel, [&](int64_t i, int t) {
    const int64_t r = i * panel;
    const int64_t rows = std::min(panel, m - r);
    std::vector<float>& scratch = panels_[static_cast<size_t>(t)];
    scratch.resize(static_cast<size_t>(panel * k));
    expand_weights(kernels_, w.dtype, wbytes + static_cast<uint64_t>(r) * row_bytes, scratch.data(),
                   rows * k);
    gemv_batch(path_, DType::kF32, scratch.data(), k, nullptr, x.as<const float>(), n, y + r, m, 0,
               rows);
  });
}

}  // namespace duet::onednn
