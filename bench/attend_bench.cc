// Single-thread speed of decode attention alone (VectorKernels::attend in
// backends/onednn/vector_kernels.h) for SmolLM2-135M's geometry — 3 KV
// heads, 3 query heads per KV head, head_dim 64 — over 2,048 cached
// positions, per KV-cache dtype and CPU path (q8_0-tiles: the VNNI path's
// tiled q8_0 cache, kernels/kv_tiles.h, read by attend_tiles; f16-tiles:
// the AVX-512 paths' tiled f16 cache, backend option f16_cache_tiles). One iteration is one decode
// token's attention: all 30 layers, each over its own cache. The figure of
// merit is bytes_per_second, cache bytes read per second; best_ms is the
// fastest token (on a shared machine the average includes preemption).
//
//   hot:    one layer's cache every time (0.8–3.1 MB: in L2/L3), which
//           measures the kernel's arithmetic.
//   stream: 30 layers' caches (25–94 MB), read as decode reads them.
//
//   build/backends/onednn/attend_bench --benchmark_min_time=0.5
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "duet/dtype.h"
#include "duet/quant.h"
#include "kernels/cpu_features.h"
#include "kernels/kv_tiles.h"
#include "random_floats.h"
#include "vector_kernels.h"

namespace {

using duet::DType;
using duet::onednn::CpuPath;
using duet::testdata::random_floats;

constexpr int32_t kKvHeads = 3, kGroup = 3, kHeadDim = 64, kLayers = 30;
constexpr int64_t kPositions = 2048;
constexpr int64_t kRow = int64_t{kKvHeads} * kHeadDim;  // elements per cache slot

// `tiles`: a q8_0 or f16 cache in tiles (kernels/kv_tiles.h), read by
// attend_tiles; otherwise slot rows, read by attend.
void bench_attend(benchmark::State& state, DType type, CpuPath path, bool stream, bool tiles) {
  const int64_t layers = stream ? kLayers : 1;
  const auto slot_bytes = static_cast<int64_t>(*duet::dtype_row_bytes(type, kRow));
  const int64_t layer_bytes = slot_bytes * kPositions;
  const int64_t tile_bytes = kKvHeads * duet::onednn::tile_head_bytes(type, kHeadDim);
  // [layer][k|v][position] as the onednn cache lays them out, stored by core.
  std::vector<uint8_t> cache(static_cast<size_t>(2 * layers * layer_bytes));
  const std::vector<float> x = random_floats(kRow * kPositions, 1);
  std::vector<uint8_t> row(static_cast<size_t>(slot_bytes));
  for (int64_t part = 0; part < 2 * layers; ++part) {
    for (int64_t p = 0; p < kPositions; ++p) {
      uint8_t* slot = cache.data() + part * layer_bytes + p * slot_bytes;
      if (!tiles) {
        duet::quantize_row(type, x.data() + p * kRow, slot, kRow);
        continue;
      }
      duet::quantize_row(type, x.data() + p * kRow, row.data(), kRow);
      duet::onednn::put_tile_row(
          type, part % 2 == 0 ? duet::onednn::TilePart::kKeys : duet::onednn::TilePart::kValues,
          row.data(), kKvHeads, kHeadDim,
          cache.data() + part * layer_bytes + p / duet::onednn::kTileSlots * tile_bytes,
          static_cast<int32_t>(p % duet::onednn::kTileSlots));
    }
  }
  const int32_t heads = kKvHeads * kGroup;
  const std::vector<float> q = random_floats(int64_t{heads} * kHeadDim, 2);
  std::vector<float> scores(static_cast<size_t>(heads * (kPositions + kHeadDim) + 16 * kHeadDim));
  std::vector<float> st(static_cast<size_t>(heads * (2 + kHeadDim)));
  std::vector<float> out(static_cast<size_t>(heads * kHeadDim));
  const duet::onednn::VectorKernels& kernels = duet::onednn::vector_kernels(path);
  double best = 1e30;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    for (int32_t l = 0; l < kLayers; ++l) {
      const uint8_t* k = cache.data() + 2 * (l % layers) * layer_bytes;
      const duet::onednn::SoftmaxPart part{st.data(), st.data() + heads, st.data() + 2 * heads};
      std::fill(part.max, part.max + heads, -INFINITY);
      std::fill(part.sum, part.sum + heads, 0.0f);
      std::fill(part.acc, part.acc + int64_t{heads} * kHeadDim, 0.0f);
      if (tiles) {
        kernels.attend_tiles(q.data(), kKvHeads, kGroup, kHeadDim, 0.125f, type, k, k + layer_bytes,
                             tile_bytes, 0, kPositions, scores.data(), part);
      } else {
        kernels.attend(q.data(), kKvHeads, kGroup, kHeadDim, 0.125f, k, k + layer_bytes, type,
                       slot_bytes, kPositions, scores.data(), part);
      }
      kernels.merge(&part, 1, heads, kHeadDim, out.data());
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
    best = std::min(
        best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  state.SetBytesProcessed(state.iterations() * 2 * kLayers * layer_bytes);
  state.counters["best_ms"] = best * 1e3;
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  benchmark::AddCustomContext("cpu_path",
                              duet::onednn::cpu_path_name(duet::onednn::detect_cpu_path()));
  for (CpuPath path : {CpuPath::kScalar, CpuPath::kAvx2, CpuPath::kAvx512, CpuPath::kAvx512Vnni}) {
    if (path > duet::onednn::detect_cpu_path()) continue;
    const std::string p = duet::onednn::cpu_path_name(path);
    for (DType type : {DType::kF32, DType::kF16, DType::kQ8_0}) {
      for (bool tiles : {false, true}) {
        const bool tiled = type == DType::kF16
                               ? path >= CpuPath::kAvx512
                               : type == DType::kQ8_0 && path == CpuPath::kAvx512Vnni;
        if (tiles && !tiled) continue;
        for (bool stream : {false, true}) {
          benchmark::RegisterBenchmark(
              ("attend/" + std::string(duet::dtype_name(type)) + (tiles ? "-tiles/" : "/") + p +
               (stream ? "/stream" : "/hot"))
                  .c_str(),
              bench_attend, type, path, stream, tiles);
        }
      }
    }
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
