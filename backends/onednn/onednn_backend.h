// onednn_backend.h — the fast CPU backend: oneDNN GEMM for prefill,
// quantized SIMD gemv kernels for decode, online-softmax attention, all on
// one persistent thread pool.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "duet/backend.h"
#include "duet/host_device.h"
#include "duet/options.h"
#include "onednn_ops.h"
#include "thread_pool.h"

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
//                     Default, the measured crossovers: on the AVX-512 paths
//                     (whose gemv kernels take up to 8 rows at once) 32 with
//                     q8x2 and 48 with q8; on AVX2 and scalar 16 and 24.
//   batch_invariant   false (default) or true: each row's results — hence a
//                     sequence's logits — are bit-identical whatever else
//                     shares the step (other sequences, how a prompt is cut
//                     into chunks) and whatever `threads` is (issue 17). Every
//                     matmul then takes the per-row gemv kernels (bf16 weights:
//                     expanded to f32 and through the f32 gemv kernel), never
//                     GEMM, so it fixes matmul_min_rows (setting both is an
//                     error); attention splits every row, prompt or decode,
//                     into stretches at fixed positions (onednn_attention.h);
//                     a q8_0 cache is kept in VNNI tiles only when
//                     block_tokens is a multiple of 16. Costs prefill speed:
//                     docs/performance.md, "Batch-invariant mode (onednn)".
struct BackendOptions {
  int threads = 1;               // threads of the pool, the caller included
  int64_t min_gemm_rows = 1;     // matmuls with at least this many rows use GEMM
  int gemv_terms = 2;            // 8-bit terms per activation row in gemv: q8x2 = 2, q8 = 1
  bool batch_invariant = false;  // see above; min_gemm_rows is then unused

  // Reads and validates `options` (calling finish()); defaults that follow
  // the CPU take `path`'s. Throws duet::Error(kConfig) naming the key path
  // for a bad or unknown key.
  static BackendOptions parse(const Options& options, CpuPath path);
  // CPUs this process may run on (its affinity mask), at least 1.
  static int available_cpus();
};

class OnednnBackend final : public Backend {
 public:
  // REQUIRES: path ≤ hardware_cpu_path().
  OnednnBackend(const BackendOptions& options, CpuPath path);

  std::string name() const override { return "onednn"; }
  Device& device() override { return device_; }
  Ops& ops() override { return ops_; }

  std::vector<std::string> attention_impls() const override { return {"full"}; }
  std::unique_ptr<Attention> create_attention(const std::string& impl,
                                              const AttentionSpec& spec) override;
  std::vector<std::string> kv_cache_impls() const override { return {"contiguous"}; }
  Support check_kv_cache(const KVCacheSpec& spec) const override;
  std::unique_ptr<KVCache> create_kv_cache(const KVCacheSpec& spec) override;
  int32_t kv_cache_tile_slots(const KVCacheSpec& spec) const override;

 private:
  CpuPath path_;
  bool batch_invariant_;
  std::shared_ptr<ThreadPool> pool_;
  HostDevice device_{"onednn", HostMemory::kLazyPages};
  OnednnOps ops_;
};

}  // namespace duet::onednn
