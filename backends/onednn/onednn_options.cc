#include "onednn_options.h"

#include <sched.h>

#include <algorithm>
#include <string>
#include <thread>

#include "duet/error.h"
#include "kernels/row_tiles.h"

namespace duet::onednn {
namespace {

// Rows from which expanding weight panels to f32 for oneDNN GEMM beats the
// gemv kernels, whose cost grows with every row, measured with `duet bench
// configs/smollm2-onednn.yaml --tests pp -p 16,24,32,48,64` and
// matmul_min_rows 1 (always GEMM) against 10^5 (never), 2 threads.
// AVX-512 paths, whose gemv_batch unpacks each weight block once for up to 8
// rows: with two activation terms the two tie at 32 rows (pp32 310 against
// 315 t/s, GEMM ahead at 64: 418 against 315), with one gemv stays ahead to
// about 48. AVX2 and scalar, which multiply one row at a time: tie at 16 with
// two terms, GEMM ahead from 24 with one.
constexpr int64_t kDefaultMinGemmRowsQ8x2 = 16;
constexpr int64_t kDefaultMinGemmRowsQ8 = 24;
constexpr int64_t kDefaultMinGemmRowsQ8x2Avx512 = 32;
constexpr int64_t kDefaultMinGemmRowsQ8Avx512 = 48;
// The same with row tiles (AVX-512 VNNI), the same command with -p
// 128,256,512, two rounds on an AMD EPYC (family 26, Zen 5), 2 threads: with
// two terms the tiles lead to 256 rows (pp128 1,694-1,759 against 1,224 t/s;
// pp256 1,672-1,706 against 1,513-1,547) and tie at 512 (1,378-1,593
// against 1,532-1,617); with one term they led at every size tried (pp512
// 2,074 against 1,568), so GEMM is left to larger chunks.
constexpr int64_t kDefaultMinGemmRowsQ8x2Tiles = 512;
constexpr int64_t kDefaultMinGemmRowsQ8Tiles = 4096;
// AVX2's tiles (q4_0, q4_1, q4_k, q8_0; q5_0 and q5_1 since, not measured
// apart) against GEMM on an AVX2 CPU's
// oneDNN, approximated on the Zen 4 of 2026-12-06 (AMD EPYC, family 25 model
// 17: its 512-bit FMA issues one a cycle, as two 256-bit ones do on Zen 2/3)
// with DUET_CPU_PATH=avx2 DNNL_MAX_CPU_ISA=AVX2, 2 threads, SmolLM2 Q4_1:
// `duet bench configs/smollm2-onednn.yaml --tests pp -p 32,64,128,256,512`,
// matmul_min_rows 16 (GEMM) against 100000 (tiles), two rounds: pp32
// 577 / 496 against 610 / 605 t/s, pp64 720 / 607 against 623 / 627, pp128
// 838 / 701 against 642 / 648, pp512 775 / 757 against 623 / 632; `duet
// bench configs/smollm2-batch.yaml --batch 16,64`: 16 sequences 229 against
// 446 t/s (GEMM expands every matrix to f32 each step), 64 level (487
// against 476). So GEMM from 64 rows for the matrices with tiles; the
// others keep the gemv's crossover.
constexpr int64_t kDefaultMinGemmRowsAvx2Tiles = 64;
// Matrices of kLargeMatrixWeights or more keep the tiles, two terms too, up
// to the one-term crossover: the 1B-shaped model on the Intel VM of
// 2026-12-04 (AVX-512 VNNI), `duet bench MODEL.yaml -p 512 --tests pp`, GEMM
// against tiles for such matrices, two rounds: Q4_K_M pp512 130-137 against
// 145-150 t/s, pp2048 (one chunk) 113-117 against 134; Q8_0 pp512 123
// against 159-161. Smaller matrices measured level or behind on tiles at 512
// rows (SmolLM2's, at most 1536 x 576: 1,020-1,070 against 1,087-1,120 with
// all tiles; Gemma 3 270M's 2048 x 640 ones 1,074-1,096 against
// 1,131-1,154): quantizing the activations costs each matrix its rows times
// k, and a larger matrix shares that over more weights.
constexpr int64_t kDefaultMinGemmRowsLargeQ8x2Tiles = kDefaultMinGemmRowsQ8Tiles;
// With AMX the tiles lead at every size measured, so GEMM is never the
// default: `duet bench configs/smollm2-onednn.yaml --tests pp -p 512,2048`,
// 2 threads, Intel Xeon with AMX (2026-12-05), tiles against
// matmul_min_rows=512: pp512 1,535 against 1,123 t/s, pp2048 1,015 against
// 830.
constexpr int64_t kDefaultMinGemmRowsAmx = int64_t{1} << 20;
// Where 512-bit operations run on 256-bit units (avx512_split_units(): Zen 4)
// one 512-bit f32 FMA issues a cycle (16 multiply-adds), while one
// two-term vpdpbusd does 32, and GEMM fell behind the tiles at every prompt
// size measured, so it is never the default there either:
// `duet bench configs/smollm2-onednn.yaml --tests pp -p 128,512` and `-p
// 2048`, two rounds alternating matmul_min_rows=512 with 100000 (tiles
// throughout), 2 threads, AMD EPYC family 25 model 17 (Zen 4), 2026-12-05:
// pp512 752 / 809 against 1,055 / 1,143 t/s, pp2048 570 / 606 against 792 /
// 638, pp128 level (tiles either way; 1,038 / 1,305 against 950 / 1,257).
constexpr int64_t kDefaultMinGemmRowsSplitUnits = int64_t{1} << 20;

int64_t default_min_gemm_rows(int gemv_terms, CpuPath path, bool tiles) {
  // On AVX2 the types with tiles have a crossover of their own
  // (kDefaultMinGemmRowsAvx2Tiles); this is the others', the gemv's.
  if (tiles && path == CpuPath::kAvx512Vnni) {
    if (avx512_split_units()) return kDefaultMinGemmRowsSplitUnits;
    return gemv_terms == 2 ? kDefaultMinGemmRowsQ8x2Tiles : kDefaultMinGemmRowsQ8Tiles;
  }
  if (path >= CpuPath::kAvx512) {
    return gemv_terms == 2 ? kDefaultMinGemmRowsQ8x2Avx512 : kDefaultMinGemmRowsQ8Avx512;
  }
  return gemv_terms == 2 ? kDefaultMinGemmRowsQ8x2 : kDefaultMinGemmRowsQ8;
}

// Rows from which the row tiles beat the gemv kernels on the AVX-512 VNNI
// path: already at 2 (qgemv_bench, [1536, 576] q4_1, two terms: 7.9 against
// 17.9 per row).
constexpr int64_t kDefaultMinTileRows = 2;

int64_t default_min_tile_rows(CpuPath path) {
  return row_tiles_path(path) ? kDefaultMinTileRows : 0;
}

// "backend.options." or "" for options read at the top level.
std::string at(const Options& options) {
  return options.path().empty() ? "" : options.path() + ".";
}

}  // namespace

int BackendOptions::available_cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

BackendOptions BackendOptions::parse(const Options& options, CpuPath path) {
  BackendOptions o;
  o.threads = static_cast<int>(options.get_int("threads", std::min(available_cpus(), 256), 1, 256));
  o.gemv_terms = options.get_choice("gemv_activations", "q8x2", {"q8x2", "q8"}) == "q8x2" ? 2 : 1;
  o.min_tile_rows = options.get_int("row_tiles_min_rows", default_min_tile_rows(path), 0, 1 << 20);
  const std::string amx = options.get_choice("amx", "auto", {"auto", "int8", "off"});
  o.amx = amx != "off" && o.min_tile_rows != 0 && path == CpuPath::kAvx512Vnni && amx_int8_usable();
  o.amx_bf16 = o.amx && amx == "auto" && amx_bf16_usable();
  o.min_gemm_rows =
      options.get_int("matmul_min_rows",
                      default_min_gemm_rows(o.gemv_terms, path, o.min_tile_rows != 0), 1, 1 << 20);
  o.min_gemm_rows_tiles = o.min_gemm_rows;
  o.min_gemm_rows_large = o.min_gemm_rows;
  o.min_gemm_rows_amx = o.min_gemm_rows;
  if (!options.has("matmul_min_rows") && o.min_tile_rows != 0 && path == CpuPath::kAvx2) {
    o.min_gemm_rows_tiles = o.min_gemm_rows_large = kDefaultMinGemmRowsAvx2Tiles;
  }
  if (!options.has("matmul_min_rows") && o.min_tile_rows != 0 && o.gemv_terms == 2 &&
      path == CpuPath::kAvx512Vnni) {
    o.min_gemm_rows_large = std::max(o.min_gemm_rows, kDefaultMinGemmRowsLargeQ8x2Tiles);
  }
  if (!options.has("matmul_min_rows") && o.amx) o.min_gemm_rows_amx = kDefaultMinGemmRowsAmx;
  if (o.min_tile_rows != 0 && !row_tiles_path(path)) {
    throw Error(ErrorKind::kConfig,
                at(options) + "row_tiles_min_rows: " + std::to_string(o.min_tile_rows) +
                    ": row-tile kernels need AVX-512 VNNI or AVX2 and this run's CPU path is " +
                    cpu_path_name(path) + "; set it to 0 or remove it");
  }
  o.batch_invariant = options.get_bool("batch_invariant", false);
  o.f16_cache_tiles = options.get_bool("f16_cache_tiles", true);
  options.finish();
  for (const char* key : {"matmul_min_rows", "row_tiles_min_rows"}) {
    if (o.batch_invariant && options.has(key)) {
      // GEMM's summation order for a row depends on how many rows it
      // multiplies, and the tiles' order differs from the gemv kernels'.
      throw Error(ErrorKind::kConfig,
                  at(options) + key +
                      ": batch_invariant: true sends every matmul row through the per-row gemv "
                      "kernels, which fixes " +
                      key + "; remove one of " + at(options) + "batch_invariant and " +
                      at(options) + key);
    }
  }
  return o;
}

}  // namespace duet::onednn
