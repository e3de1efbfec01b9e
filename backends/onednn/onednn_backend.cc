#include "onednn_backend.h"

#include <sched.h>

#include <algorithm>
#include <string>
#include <thread>

#include "duet/error.h"
#include "onednn_attention.h"
#include "onednn_kv_cache.h"

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

int64_t default_min_gemm_rows(int gemv_terms, CpuPath path) {
  if (path >= CpuPath::kAvx512) {
    return gemv_terms == 2 ? kDefaultMinGemmRowsQ8x2Avx512 : kDefaultMinGemmRowsQ8Avx512;
  }
  return gemv_terms == 2 ? kDefaultMinGemmRowsQ8x2 : kDefaultMinGemmRowsQ8;
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
  o.min_gemm_rows =
      options.get_int("matmul_min_rows", default_min_gemm_rows(o.gemv_terms, path), 1, 1 << 20);
  o.batch_invariant = options.get_bool("batch_invariant", false);
  options.finish();
  if (o.batch_invariant && options.has("matmul_min_rows")) {
    // GEMM's summation order for a row depends on how many rows it multiplies.
    const std::string at = options.path().empty() ? "" : options.path() + ".";
    throw Error(ErrorKind::kConfig,
                at +
                    "matmul_min_rows: batch_invariant: true sends every matmul row through "
                    "the per-row gemv kernels, which fixes matmul_min_rows; remove one of " +
                    at + "batch_invariant and " + at + "matmul_min_rows");
  }
  return o;
}

OnednnBackend::OnednnBackend(const BackendOptions& options, CpuPath path)
    : path_(path),
      batch_invariant_(options.batch_invariant),
      pool_(std::make_shared<ThreadPool>(options.threads)),
      ops_(pool_, path, options.min_gemm_rows, options.gemv_terms, options.batch_invariant) {}

std::unique_ptr<Attention> OnednnBackend::create_attention(const std::string& impl,
                                                           const AttentionSpec& spec) {
  if (impl != "full") {
    throw Error(ErrorKind::kConfig,
                "backend 'onednn' provides no attention implementation named '" + impl +
                    "'; available: 'full'");
  }
  Support s = OnednnAttention::check_spec(spec);
  if (!s.ok()) throw Error(ErrorKind::kConfig, s.reasons.front());
  return std::make_unique<OnednnAttention>(spec, pool_, path_, batch_invariant_);
}

Support OnednnBackend::check_kv_cache(const KVCacheSpec& spec) const {
  return OnednnKVCache::check(spec);
}

std::unique_ptr<KVCache> OnednnBackend::create_kv_cache(const KVCacheSpec& spec) {
  Support s = OnednnKVCache::check(spec);
  if (!s.ok()) throw Error(ErrorKind::kConfig, s.reasons.front());
  return std::make_unique<OnednnKVCache>(spec, device_, path_, batch_invariant_);
}

int32_t OnednnBackend::kv_cache_tile_slots(const KVCacheSpec& spec) const {
  return OnednnKVCache::tile_slots(spec, path_, batch_invariant_);
}

}  // namespace duet::onednn
