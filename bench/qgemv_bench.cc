// Single-thread throughput of the onednn backend's gemv kernels
// (backends/onednn/kernels/qgemv.h) on SmolLM2-135M's decode shapes, for every
// CPU path this machine runs. The figure of merit is bytes_per_second: weight
// bytes read per second (activation quantization is measured on its own),
// averaged over the run, and best_GB/s, the same for the fastest single product:
// on a shared machine the average includes time the benchmark was preempted,
// and the best is the kernel's own speed.
//
//   hot:    the same matrix every iteration; small matrices then sit in L2,
//           so this measures the kernel's arithmetic.
//   stream: cycles through copies of the matrix totalling ≥ 256 MiB, so each
//           product reads its weights from L3/DRAM as decode does (the whole
//           model does not fit in the caches).
//
//   batch:  gemv_batch of n vectors on a hot matrix; per_vector_ns is one
//           product's share of the batch.
//   tiles:  row_tiles_product (kernels/row_tiles.h) of n vectors on the same
//           matrix packed into row tiles, one or two activation terms
//           (t1, t2): per_vector_ns as for batch.
//   amx:    row_tiles_product_amx (kernels/row_tiles_amx.h) on the same
//           tiles, packing the activation rows into tile order included
//           (the matmul packs once per product); CPUs with AMX-INT8 only.
//           /stream: cycling through copies of the tiles as gemv's stream.
//   amx_bf16: row_tiles_product_amx_bf16 (kernels/row_tiles_amx_bf16.h) on
//           the same tiles, splitting the rows into bf16 included; CPUs
//           with AMX-BF16 only.
//   sgemm:  oneDNN's f32 sgemm of n rows against the same matrix expanded to
//           f32 beforehand, in panels of at most 1 MiB (Matmul::gemm, from
//           matmul_min_rows on, takes smaller panels still, eight tasks per
//           thread, and expands each just before its sgemm): per_vector_ns
//           as for tiles, for the kernels' side of the crossover; the model
//           decides it (duet bench --set backend.options.matmul_min_rows).
//           oneDNN threads with OpenMP: OMP_NUM_THREADS=1 makes it one
//           thread like the other cases.
//
//   OMP_NUM_THREADS=1 build/backends/onednn/kernels/qgemv_bench --benchmark_min_time=0.5
#include <benchmark/benchmark.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "duet/dtype.h"
#include "duet/quant.h"
#include "kernels/cpu_features.h"
#include "kernels/qgemv.h"
#include "kernels/row_tiles.h"
#include "kernels/row_tiles_amx.h"
#include "kernels/row_tiles_amx_bf16.h"
#include "random_floats.h"

namespace {

using duet::DType;
using duet::onednn::CpuPath;
using duet::testdata::random_floats;

struct Shape {
  const char* name;
  DType type;
  int64_t rows;
  int64_t k;
};

// ffn_down is [576, 1536]; ffn_gate/up are [1536, 576]; token_embd (the LM
// head) is the Q8_0 [49152, 576] matrix, the largest read of every token.
// ffn_down in SmolLM2's Q6_K file is q6_k (its other rows, 576 wide, are
// not whole super-blocks and fall back to q8_0); its IQ4_NL file (llama.cpp's)
// stores ffn_gate/up as iq4_nl. The 1B-shaped model's
// ffn_gate/up, [8192, 2048], in the K-quants of its Q2_K, Q3_K_M, Q4_K_M and
// Q5_K_M files.
constexpr Shape kShapes[] = {
    {"q4_1_1536x576", DType::kQ4_1, 1536, 576},     {"q4_1_576x1536", DType::kQ4_1, 576, 1536},
    {"iq4_nl_1536x576", DType::kIQ4_NL, 1536, 576}, {"q8_0_49152x576", DType::kQ8_0, 49152, 576},
    {"q6_k_576x1536", DType::kQ6_K, 576, 1536},     {"q2_k_8192x2048", DType::kQ2_K, 8192, 2048},
    {"q3_k_8192x2048", DType::kQ3_K, 8192, 2048},   {"q4_k_8192x2048", DType::kQ4_K, 8192, 2048},
    {"q5_k_8192x2048", DType::kQ5_K, 8192, 2048},   {"q5_0_1536x576", DType::kQ5_0, 1536, 576},
};

constexpr int64_t kStreamBytes = int64_t{256} << 20;

// `copies` copies of one random matrix, quantized by core's quantize_row.
std::vector<uint8_t> make_weights(const Shape& s, int64_t copies) {
  const auto row_bytes =
      static_cast<int64_t>(*duet::dtype_row_bytes(s.type, static_cast<uint64_t>(s.k)));
  const int64_t bytes = s.rows * row_bytes;
  std::vector<uint8_t> w(static_cast<size_t>(bytes * copies));
  const std::vector<float> row = random_floats(s.k, 1);
  for (int64_t r = 0; r < s.rows; ++r)
    duet::quantize_row(s.type, row.data(), w.data() + r * row_bytes, s.k);
  for (int64_t c = 1; c < copies; ++c)
    std::copy(w.begin(), w.begin() + bytes, w.begin() + c * bytes);
  return w;
}

void bench_gemv(benchmark::State& state, Shape s, CpuPath path, bool stream) {
  const int64_t bytes =
      s.rows * static_cast<int64_t>(*duet::dtype_row_bytes(s.type, static_cast<uint64_t>(s.k)));
  const int64_t copies = stream ? (kStreamBytes + bytes - 1) / bytes : 1;
  const std::vector<uint8_t> w = make_weights(s, copies);
  const std::vector<float> x = random_floats(s.k, 2);
  std::vector<float> y(static_cast<size_t>(s.rows));
  duet::onednn::Q8Activations xq;
  xq.quantize(x.data(), s.k, path);
  int64_t copy = 0;
  double best = 1e30;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    duet::onednn::gemv(path, s.type, w.data() + copy * bytes, s.k, xq, x.data(), y.data(), 0,
                       s.rows);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
    best = std::min(
        best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    copy = copy + 1 == copies ? 0 : copy + 1;
  }
  state.SetBytesProcessed(state.iterations() * bytes);
  state.counters["best_GB/s"] = static_cast<double>(bytes) / best * 1e-9;
}

// gemv_batch of n vectors (two terms each, as the backend sends them) over a
// hot matrix: per_vector_ns is the time of one product within the batch, to
// set against gemv's time for one vector alone.
void bench_gemv_batch(benchmark::State& state, Shape s, CpuPath path, int64_t n) {
  const std::vector<uint8_t> w = make_weights(s, 1);
  std::vector<duet::onednn::Q8Activations> xq(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const std::vector<float> x = random_floats(s.k, static_cast<uint32_t>(10 + i));
    xq[static_cast<size_t>(i)].quantize(x.data(), s.k, path, 2);
  }
  std::vector<float> y(static_cast<size_t>(n * s.rows));
  for (auto _ : state) {
    duet::onednn::gemv_batch(path, s.type, w.data(), s.k, xq.data(), nullptr, n, y.data(), s.rows,
                             0, s.rows);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.counters["per_vector_ns"] = benchmark::Counter(
      static_cast<double>(n) * 1e9,
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

// A matrix of shape s packed into row tiles, and n activation rows of
// `terms` terms quantized on `path`.
struct TileProduct {
  duet::onednn::RowTiles tiles;
  std::vector<duet::onednn::Q8Activations> xq;
  TileProduct(Shape s, CpuPath path, int64_t n, int terms)
      : tiles(s.type, s.rows, s.k), xq(static_cast<size_t>(n)) {
    const std::vector<uint8_t> w = make_weights(s, 1);
    tiles.pack(w.data(), 0, tiles.tiles());
    for (int64_t i = 0; i < n; ++i) {
      const std::vector<float> x = random_floats(s.k, static_cast<uint32_t>(10 + i));
      xq[static_cast<size_t>(i)].quantize(x.data(), s.k, path, terms);
    }
  }
};

void bench_row_tiles(benchmark::State& state, Shape s, CpuPath path, int64_t n, int terms) {
  const TileProduct p(s, path, n, terms);
  std::vector<float> y(static_cast<size_t>(n * s.rows));
  for (auto _ : state) {
    duet::onednn::row_tiles_product(path, p.tiles, p.xq.data(), n, y.data(), s.rows, 0,
                                    p.tiles.tiles());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.counters["per_vector_ns"] = benchmark::Counter(
      static_cast<double>(n) * 1e9,
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void bench_row_tiles_amx(benchmark::State& state, Shape s, int64_t n, int terms, bool stream) {
  const TileProduct p(s, CpuPath::kAvx512Vnni, n, terms);
  // stream: copies of the packed tiles totalling >= kStreamBytes, one per
  // iteration in turn, so that the weights come from L3/DRAM as in a model.
  const int64_t copies = stream ? (kStreamBytes + p.tiles.bytes() - 1) / p.tiles.bytes() : 1;
  std::vector<duet::onednn::RowTiles> extra;
  const std::vector<uint8_t> w = stream ? make_weights(s, 1) : std::vector<uint8_t>{};
  for (int64_t c = 1; c < copies; ++c) {
    extra.emplace_back(s.type, s.rows, s.k);
    extra.back().pack(w.data(), 0, extra.back().tiles());
  }
  duet::onednn::AmxActivations act;
  std::vector<float> y(static_cast<size_t>(n * s.rows));
  int64_t copy = 0;
  for (auto _ : state) {
    act.reset(n, s.k, terms);
    act.pack(p.xq.data());
    const duet::onednn::RowTiles& tiles =
        copy == 0 ? p.tiles : extra[static_cast<size_t>(copy - 1)];
    duet::onednn::row_tiles_product_amx(tiles, act, y.data(), s.rows, 0, tiles.tiles());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
    copy = copy + 1 == copies ? 0 : copy + 1;
  }
  state.counters["per_vector_ns"] = benchmark::Counter(
      static_cast<double>(n) * 1e9,
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void bench_row_tiles_amx_bf16(benchmark::State& state, Shape s, int64_t n) {
  const TileProduct p(s, CpuPath::kAvx512Vnni, 0, 2);
  std::vector<float> x(static_cast<size_t>(n * s.k));
  for (int64_t i = 0; i < n; ++i) {
    const std::vector<float> row = random_floats(s.k, static_cast<uint32_t>(10 + i));
    std::copy(row.begin(), row.end(), x.begin() + i * s.k);
  }
  duet::onednn::AmxBf16Rows act;
  std::vector<float> y(static_cast<size_t>(n * s.rows));
  for (auto _ : state) {
    act.reset(n, s.k);
    for (int64_t i = 0; i < n; ++i) act.pack_row(x.data() + i * s.k, i);
    duet::onednn::row_tiles_product_amx_bf16(p.tiles, act, y.data(), s.rows, 0, p.tiles.tiles());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.counters["per_vector_ns"] = benchmark::Counter(
      static_cast<double>(n) * 1e9,
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void bench_sgemm(benchmark::State& state, Shape s, int64_t n) {
  const std::vector<uint8_t> w = make_weights(s, 1);
  const auto row_bytes =
      static_cast<int64_t>(*duet::dtype_row_bytes(s.type, static_cast<uint64_t>(s.k)));
  std::vector<float> wf(static_cast<size_t>(s.rows * s.k));
  for (int64_t r = 0; r < s.rows; ++r) {
    duet::dequantize_row(s.type, w.data() + r * row_bytes, wf.data() + r * s.k, s.k);
  }
  std::vector<float> x(static_cast<size_t>(n * s.k));
  for (int64_t i = 0; i < n; ++i) {
    const std::vector<float> row = random_floats(s.k, static_cast<uint32_t>(10 + i));
    std::copy(row.begin(), row.end(), x.begin() + i * s.k);
  }
  std::vector<float> y(static_cast<size_t>(n * s.rows));
  // Matmul::panel_rows: 1 MiB of f32 rows, a multiple of 16 (the cap on
  // Matmul::gemm's panels).
  const int64_t panel = std::max<int64_t>(16, (int64_t{1} << 20) / (s.k * 4) / 16 * 16);
  for (auto _ : state) {
    for (int64_t r = 0; r < s.rows; r += panel) {
      const int64_t rows = std::min(panel, s.rows - r);
      if (dnnl_sgemm('N', 'T', n, rows, s.k, 1.0f, x.data(), s.k, wf.data() + r * s.k, s.k, 0.0f,
                     y.data() + r, s.rows) != dnnl_success) {
        state.SkipWithError("dnnl_sgemm failed");
        return;
      }
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.counters["per_vector_ns"] = benchmark::Counter(
      static_cast<double>(n) * 1e9,
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void bench_quantize(benchmark::State& state, int64_t k, CpuPath path, int terms) {
  const std::vector<float> x = random_floats(k, 3);
  duet::onednn::Q8Activations xq;
  for (auto _ : state) {
    xq.quantize(x.data(), k, path, terms);
    benchmark::DoNotOptimize(xq.q());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * k * static_cast<int64_t>(sizeof(float)));
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  benchmark::AddCustomContext("cpu_path",
                              duet::onednn::cpu_path_name(duet::onednn::detect_cpu_path()));
  benchmark::AddCustomContext("cpu_features", duet::onednn::cpu_features_summary());
  for (CpuPath path : {CpuPath::kScalar, CpuPath::kAvx2, CpuPath::kAvx512, CpuPath::kAvx512Vnni}) {
    if (path > duet::onednn::detect_cpu_path()) continue;
    const std::string p = duet::onednn::cpu_path_name(path);
    for (const Shape& s : kShapes) {
      for (bool stream : {false, true}) {
        benchmark::RegisterBenchmark(
            ("gemv/" + std::string(s.name) + "/" + p + (stream ? "/stream" : "/hot")).c_str(),
            bench_gemv, s, path, stream);
      }
    }
    for (const Shape& s : kShapes) {
      for (int64_t n : {1, 2, 4, 8, 16}) {
        benchmark::RegisterBenchmark(
            ("gemv_batch/" + std::string(s.name) + "/" + p + "/n" + std::to_string(n)).c_str(),
            bench_gemv_batch, s, path, n);
      }
    }
    if (duet::onednn::row_tiles_path(path)) {
      for (const Shape& s : kShapes) {
        if (!duet::onednn::row_tiles_kernel(path, s.type)) continue;
        for (int terms : {1, 2}) {
          for (int64_t n : {1, 2, 4, 8, 12, 16, 64, 128, 512}) {
            benchmark::RegisterBenchmark(("tiles/" + std::string(s.name) + "/" + p + "/t" +
                                          std::to_string(terms) + "/n" + std::to_string(n))
                                             .c_str(),
                                         bench_row_tiles, s, path, n, terms);
          }
        }
      }
    }
    if (path == CpuPath::kAvx512Vnni && duet::onednn::amx_int8_usable()) {
      for (const Shape& s : kShapes) {
        if (!duet::onednn::row_tiles_type(s.type)) continue;
        for (int terms : {1, 2}) {
          for (int64_t n : {4, 8, 12, 16, 32, 64, 128, 512}) {
            benchmark::RegisterBenchmark(("amx/" + std::string(s.name) + "/t" +
                                          std::to_string(terms) + "/n" + std::to_string(n))
                                             .c_str(),
                                         bench_row_tiles_amx, s, n, terms, false);
          }
          for (int64_t n : {16, 64}) {
            benchmark::RegisterBenchmark(
                ("amx/" + std::string(s.name) + "/t" + std::to_string(terms) + "/n" +
                 std::to_string(n) + "/stream")
                    .c_str(),
                bench_row_tiles_amx, s, n, terms, true);
          }
        }
      }
    }
    if (path == CpuPath::kAvx512Vnni && duet::onednn::amx_bf16_usable()) {
      for (const Shape& s : kShapes) {
        if (!duet::onednn::row_tiles_type(s.type)) continue;
        for (int64_t n : {4, 8, 12, 16, 32, 64, 128, 512}) {
          benchmark::RegisterBenchmark(
              ("amx_bf16/" + std::string(s.name) + "/n" + std::to_string(n)).c_str(),
              bench_row_tiles_amx_bf16, s, n);
        }
      }
    }
    if (path == duet::onednn::detect_cpu_path()) {
      for (const Shape& s : kShapes) {
        for (int64_t n : {16, 64, 128, 512}) {
          benchmark::RegisterBenchmark(
              ("sgemm/" + std::string(s.name) + "/n" + std::to_string(n)).c_str(), bench_sgemm, s,
              n);
        }
      }
    }
    for (int64_t k : {576, 1536}) {
      for (int terms : {1, 2}) {
        benchmark::RegisterBenchmark(
            ("quantize/k" + std::to_string(k) + "/" + p + "/t" + std::to_string(terms)).c_str(),
            bench_quantize, k, path, terms);
      }
    }
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
