// onednn_options.h — the onednn backend's `backend.options`.
#pragma once

#include <cstdint>

#include "duet/options.h"
#include "kernels/cpu_features.h"
#include "kernels/row_tiles.h"

namespace duet::onednn {

// The validated `backend.options` of this backend:
//   threads           1..256, default: the CPUs this process may run on
//                     (its affinity mask); the pool's threads, caller included.
//   gemv_activations  q8x2 (default) or q8: how matmuls with few rows send
//                     activations to the quantized gemv kernels — two 8-bit
//                     terms (about 16-bit precision; the kernels unpack the
//                     weights once for both) or one, as llama.cpp does (~1e-4
//                     normalised MSE per product).
//   matmul_min_rows   1..2^20: matmuls with at least this many activation
//                     rows expand weight panels to f32 for oneDNN GEMM.
//                     Default, the measured crossovers: with AMX (see amx)
//                     2^20, never, for the types with row tiles (the
//                     others keep the VNNI path's); with row tiles where
//                     512-bit operations run on 256-bit units
//                     (avx512_split_units(): Zen 4) 2^20; with row tiles (the
//                     AVX-512 VNNI path) 512 with q8x2 — 4096 for matrices
//                     of at least kLargeMatrixWeights weights — and 4096
//                     with q8; on the other AVX-512 paths (whose gemv
//                     kernels take up to 8 rows at once) 32 and 48; on AVX2
//                     64 for the types with row tiles there (q4_0, q4_1,
//                     q4_k, q5_0, q5_1, q8_0) and 16 and 24 for the others;
//                     on scalar 16 and 24. A value set here holds for every
//                     matrix.
//   row_tiles_min_rows  0..2^20: matmuls with at least this many activation
//                     rows, and fewer than matmul_min_rows, multiply weights
//                     repacked into row tiles (kernels/row_tiles.h) when
//                     the path has a kernel for their type
//                     (row_tiles_kernel): tiles are built on a matrix's
//                     first such product and kept on top of the model, 0.625
//                     bytes per weight for q4_0/q4_1/iq4_nl, 0.75 for
//                     q5_0/q5_1, 0.578 for q4_k, 0.703 for q5_k, 0.875 for
//                     q6_k, 1.125 for q8_0 and 1.5 for q2_k/q3_k. 0: never.
//                     All but q2_k and q3_k (tiles about the file's size)
//                     take them from one row (on AVX2 q4_0 and q4_1 only,
//                     and no tiles for iq4_nl, q5_*, q6_k, q8_0, q2_k or
//                     q3_k at all: row_tiles_from_one_row). Default 2 on the
//                     paths with a tile kernel — AVX-512 VNNI (every tile
//                     type) and AVX2 (q4_0, q4_1, q4_k) — and 0 on the
//                     others (where any other value is an error).
//   amx               auto (default), int8 or off: where the CPU and OS offer
//                     AMX-INT8 (amx_int8_usable()) on the AVX-512 VNNI path,
//                     row-tile products of kAmxMinRows or more activation
//                     rows (kAmxMinRowsHalves for q2_k, q3_k, q6_k) run on
//                     the tile unit, and matrices of those types leave GEMM
//                     to 2^20 rows (never) unless matmul_min_rows is set.
//                     auto: from kAmxBf16MinRows rows (kAmxBf16MinRowsHalves
//                     for q2_k, q3_k, q6_k), where the CPU also
//                     has AMX-BF16 (amx_bf16_usable()), on its bf16
//                     products (kernels/row_tiles_amx_bf16.h: weights and
//                     activations split into two bf16 each, closer to the
//                     reference than two 8-bit terms), below that on its
//                     int8 products (kernels/row_tiles_amx.h, bit-identical
//                     to the VNNI kernel). int8: the int8 products at every
//                     size. off: the VNNI kernel only. auto and int8 ask
//                     Linux for the tile state. Elsewhere, or with
//                     row_tiles_min_rows 0, auto and int8 are off.
//   batch_invariant   false (default) or true: each row's results — hence a
//                     sequence's logits — are bit-identical whatever else
//                     shares the step (other sequences, how a prompt is cut
//                     into chunks) and whatever `threads` is (issue 17). Every
//                     matmul then takes the per-row gemv kernels (bf16 weights:
//                     expanded to f32 and through the f32 gemv kernel), never
//                     GEMM, so it fixes matmul_min_rows (setting both is an
//                     error); attention splits every row, prompt or decode,
//                     into stretches at fixed positions (onednn_attention.h);
//                     a q8_0 (or f16) cache is kept in tiles only when
//                     block_tokens is a multiple of 16. Costs prefill speed:
//                     docs/performance.md, "Batch-invariant mode (onednn)".
//   f16_cache_tiles   true (default) or false: on the AVX-512 paths an f16 KV
//                     cache is kept in tiles of 16 slots, its keys
//                     dimension-major (kernels/kv_tiles.h), which decode
//                     attention multiplies with no reductions and streams at
//                     the memory's rate (kernels/attend_avx512.h); elsewhere,
//                     with false, or when a plugin's attention reads the
//                     cache (Backend::create_kv_cache_rows), slot rows. Same
//                     size, same results up to the order of additions.
// Weights (rows x k) from which a matrix is large for matmul_min_rows'
// default: 2^22, a 2048 x 2048 matrix.
inline constexpr int64_t kLargeMatrixWeights = int64_t{1} << 22;
// Activation rows from which a row-tile product runs on AMX, where one
// group of 16 rows costs the tile unit the same for 12 rows as for 16
// (qgemv_bench, two terms, one thread, per row, two runs; VNNI against AMX):
// q4_1 [1536, 576] at 8 rows 9.1-9.3 against 11.3-12.6 us, at 12 9.0-9.1
// against 7.8-8.4, at 16 9.1 against 6.2-6.4; q6_k [576, 1536], whose
// half-block tiles take twice the tile work, at 12 9.7-11.6 against
// 11.8-12.5 and at 16 10.3-10.4 against 8.9-9.0.
inline constexpr int64_t kAmxMinRows = 12;
inline constexpr int64_t kAmxMinRowsHalves = 16;  // kHalves tiles (q2_k, q3_k, q6_k)

// Activation rows from which `amx: auto` takes the bf16 tile products
// (qgemv_bench, one thread, packing included; int8 two terms against bf16,
// 2026-12-05): q4_1 [1536, 576] at 64 rows 346 against 397 us, at 128 634
// against 598, at 512 2,575 against 2,119; q4_k [8192, 2048] at 64 7.4
// against 6.3 ms, at 512 67 against 49; q8_0 [49152, 576] at 64 15.8
// against 13.5 ms, at 512 143 against 81. Below 64 rows each weight tile's
// dequantization and split, once per product, outweighs the faster sums.
// Half-block tiles, whose int8 products take twice the tile work, gain from
// 32 rows: q6_k [576, 1536] 283 against 260 us, q2_k [8192, 2048] 5.45
// against 4.94 ms (q4_1 [1536, 576] 204 against 269 us).
inline constexpr int64_t kAmxBf16MinRows = 64;
inline constexpr int64_t kAmxBf16MinRowsHalves = 32;  // kHalves tiles (q2_k, q3_k, q6_k)

// The rows from which `amx: auto` takes the bf16 products on tiles of `format`.
inline int64_t amx_bf16_min_rows(TileFormat format) {
  return half_scales(format) ? kAmxBf16MinRowsHalves : kAmxBf16MinRows;
}

// The rows from which a product on tiles of `format` runs on AMX.
inline int64_t amx_min_rows(TileFormat format) {
  return half_scales(format) ? kAmxMinRowsHalves : kAmxMinRows;
}

struct BackendOptions {
  int threads = 1;                  // threads of the pool, the caller included
  int64_t min_gemm_rows = 1;        // matmuls with at least this many rows use GEMM
  int64_t min_gemm_rows_tiles = 1;  // the same for matrices with a row-tile kernel
  int64_t min_gemm_rows_large = 1;  // ... of kLargeMatrixWeights or more with a row-tile kernel
  int64_t min_gemm_rows_amx = 1;    // the same for matrices the AMX kernel takes (amx)
  int gemv_terms = 2;               // 8-bit terms per activation row in gemv: q8x2 = 2, q8 = 1
  int64_t min_tile_rows = 0;        // matmuls with at least this many rows use row tiles; 0: never
  bool amx = false;                 // row tiles of kAmxMinRows or more rows on AMX
  bool amx_bf16 = false;            // from amx_bf16_min_rows() rows on AMX-BF16 (amx: auto)
  bool batch_invariant = false;     // see above; min_gemm_rows and min_tile_rows are then unused
  bool f16_cache_tiles = true;      // an f16 KV cache in tiles on the AVX-512 paths

  // Reads and validates `options` (calling finish()); defaults that follow
  // the CPU take `path`'s. Throws duet::Error(kConfig) naming the key path
  // for a bad or unknown key.
  static BackendOptions parse(const Options& options, CpuPath path);
  // CPUs this process may run on (its affinity mask), at least 1.
  static int available_cpus();
};

}  // namespace duet::onednn
