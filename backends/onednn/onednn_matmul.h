// onednn_matmul.h — out[n, m] = x[n, k] · w[m, k]ᵀ for every weight dtype,
// choosing between two strategies by the number of activation rows n.
//
// Few rows (decode, n < min_gemm_rows): the product is bound by reading the
// weights, so they are read once, in their stored block format, by the
// quantized gemv kernels (kernels/qgemv.h), which take activations quantized
// to 8-bit blocks; the weight rows are split across the pool's threads in
// equal shares, each walked front to back, and a thread done with its share
// takes chunks from the back of another's that is not
// (ThreadPool::parallel_for_shared;
// handing out all rows as tiles from one counter measured 5-15% slower
// decode, since the threads' streams then interleave).
// One 8-bit term (llama.cpp's choice) loses too much where activations have
// outlier channels — SmolLM2's reach 15x their RMS, and the blocks holding
// them keep 3 bits of precision: decode logits drift to a normalised MSE of
// ~7e-3 from the reference. So by default each activation row is sent as two
// 8-bit terms, x ≈ (d/256)*(256*q8(x) + q8 of the remainder), about 16-bit
// precision, and decode logits stay within ~5e-8 (tests/onednn_model_test.cc).
// The kernels unpack each weight block once for both terms; the second adds
// byte dot products only. gemv_activations: q8 trades it back.
//
// Many rows (prefill): the product is bound by arithmetic, so each thread
// takes panels of weight rows as it becomes free (about 8 per thread, so
// that a core of a shared machine running slower than the other does not
// hold up the step; smaller where a panel would outgrow the L2 cache),
// expands each to f32 in a scratch buffer of its own and multiplies it with
// oneDNN's f32 GEMM (dnnl_sgemm), which picks its AVX-512/AVX2 kernel at
// run time. Only one panel per thread is ever expanded, never the whole
// matrix, so memory stays at the mapped file plus a few MiB. bf16, q2_k and
// q3_k weights, which the gemv kernels lack, go this way where no row tiles
// take them (one row, or a path without tiles).
//
// Row tiles (BackendOptions::min_tile_rows ≤ n < min_gemm_rows_tiles, or <
// min_gemm_rows_large for a matrix of kLargeMatrixWeights or more, or <
// min_gemm_rows_amx where AMX runs; on the AVX-512 VNNI path for the weight
// types of row_tiles_type, on AVX2 for q4_0, q4_1, q4_k and q8_0; from one
// row where row_tiles_from_one_row says so, about the file's bytes): the weights are
// repacked once per matrix into tiles of 16 rows side by side (kernels/row_tiles.h, kept in a
// RowTilesCache) and multiplied with the quantized activation rows by
// integer dot products that advance 16 weight rows at once (products of
// kAmxMinRows rows or more (kAmxMinRowsHalves for half-block tiles) on the
// AMX tile unit where the CPU has one and
// BackendOptions::amx allows it: kernels/row_tiles_amx.h, the same results
// bit for bit; from amx_bf16_min_rows() rows on its bf16 products instead where
// the CPU has AMX-BF16 and BackendOptions::amx_bf16 is set:
// kernels/row_tiles_amx_bf16.h, the activation rows split into bf16, not
// quantized). This is the
// arithmetic of the gemv kernels, without their per-row shuffles and sums:
// batched decode, speculative verification and prompts take it rather than
// gemv or GEMM. The threads split the tiles as the gemv splits rows.
//
// Batch-invariant mode (BackendOptions::batch_invariant): every product
// takes the gemv kernels, whatever its number of rows, since they compute
// each activation row on its own with the same arithmetic (integer block
// sums, then one fixed float order per weight row) whichever rows share the
// call and however the weight rows are split among threads; GEMM does not
// promise that (its blocking, hence its summation order, follows n). bf16,
// q2_k and q3_k weights, which those kernels lack, are expanded to f32 a
// panel at a time and go through the f32 gemv kernel.
//
// Thread-safety: none; one thread calls run() at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "duet/tensor.h"
#include "kernels/qgemv.h"
#include "kernels/row_tiles_amx.h"
#include "kernels/row_tiles_amx_bf16.h"
#include "onednn_options.h"
#include "row_tiles_cache.h"
#include "thread_pool.h"
#include "vector_kernels.h"

namespace duet::onednn {

class Matmul {
 public:
  // REQUIRES: path ≤ hardware_cpu_path(), options as BackendOptions::parse
  // leaves them for `path` (gemv_terms: the 8-bit terms each activation row
  // is sent to the quantized kernels as). With batch_invariant,
  // min_gemm_rows and min_tile_rows are unused (see above). `tiles` keeps
  // the repacked weights (shared with the device that invalidates them).
  Matmul(std::shared_ptr<ThreadPool> pool, CpuPath path, const BackendOptions& options,
         std::shared_ptr<RowTilesCache> tiles);

  // The op of duet/ops.h; shapes and dtypes are checked by core.
  void run(const TensorView& x, const TensorView& w, TensorView out);
  // Ops::matmuls: out[i] = x · w[i]ᵀ, as run() would give each. When every
  // matrix takes row tiles, x is quantized once and all their tiles are one
  // parallel loop (a decode step's k and v are 12 tiles each, less than the
  // waking and joining of the pool costs); otherwise run() for each.
  void run_shared(const TensorView& x, std::span<const TensorView> w,
                  std::span<const TensorView> out);

  // Rows of f32 weights a thread expands at once for `k` columns: panels of
  // about 1 MiB stay in the L2 cache while GEMM reads them n times.
  static int64_t panel_rows(int64_t k);

 private:
  // Fills xq_[0..n) with the rows of x[n, k], quantized to terms_ terms
  // (with the derived forms gemv_batch of several rows reads, or without),
  // unless they already hold exactly these rows in that form; with
  // `for_amx`, also into amx_rows_ (each row by the thread that quantized
  // it), unless amx_rows_ already holds it.
  void quantize_rows(const float* x, int64_t n, int64_t k, bool derived_forms,
                     bool for_amx = false);
  // Fills bf16_rows_ with the rows of x[n, k], on every call (the rows are
  // not compared with the last call's, as quantize_rows compares them).
  void split_rows(const float* x, int64_t n, int64_t k);
  void gemv(const TensorView& x, const TensorView& w, TensorView out);
  // Whether x[n, k] · w[m, k]ᵀ takes row tiles.
  bool takes_tiles(int64_t n, const TensorView& w) const;
  // The row-tile products out[i] = x · w[i]ᵀ, all in one parallel loop.
  // REQUIRES takes_tiles(n, w[i]) for each.
  void tiled(const TensorView& x, std::span<const TensorView> w, std::span<const TensorView> out);
  // Rows per GEMM panel when m rows are shared out: about kTasksPerThread
  // panels per thread, a multiple of the kernels' grain.
  int64_t task_rows(int64_t m) const;
  void gemm(const TensorView& x, const TensorView& w, TensorView out);
  // Batch-invariant mode's product for weights the gemv kernels lack: f32
  // panels of them through the f32 gemv kernel.
  void gemv_expanded(const TensorView& x, const TensorView& w, TensorView out);

  std::shared_ptr<ThreadPool> pool_;
  CpuPath path_;
  int64_t min_gemm_rows_;
  int64_t min_gemm_rows_tiles_;  // for matrices with tiles
  int64_t min_gemm_rows_large_;  // for matrices of kLargeMatrixWeights or more, with tiles
  int64_t min_gemm_rows_amx_;    // for matrices the AMX kernel takes (amx_)
  int64_t min_tile_rows_;        // 0: never
  int terms_;
  bool amx_;       // row tiles of kAmxMinRows or more rows on AMX
  bool amx_bf16_;  // of amx_bf16_min_rows() or more on its bf16 products
  bool batch_invariant_;
  const VectorKernels& kernels_;
  std::shared_ptr<RowTilesCache> tiles_;
  std::vector<Q8Activations> xq_;  // one per activation row
  AmxActivations amx_rows_;        // xq_ in AMX tile order, when amx_rows_fresh_
  AmxBf16Rows bf16_rows_;          // the last tiled() call's rows, for the bf16 products
  bool amx_rows_fresh_ = false;
  // A copy of the quantized_rows_ activation rows xq_ holds (0: none),
  // compared row by row with the next input, so that new values at the
  // same address are never mistaken for them.
  std::vector<float> quantized_;
  int64_t quantized_rows_ = 0;
  std::vector<std::vector<float>> panels_;  // one per thread
  // tiled()'s products, during a call (the vector is kept, empty, to spare
  // an allocation per call).
  struct TiledProduct {
    std::shared_ptr<const RowTiles> tiles;
    float* y;
    int64_t first;  // the index of its first tile among all the call's tiles
    bool amx;
    bool bf16;  // amx, on the bf16 products
  };
  std::vector<TiledProduct> tiled_products_;
};

}  // namespace duet::onednn
