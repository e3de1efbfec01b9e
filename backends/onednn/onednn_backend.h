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
#include "onednn_device.h"
#include "onednn_kv_cache.h"
#include "onednn_ops.h"
#include "onednn_options.h"
#include "thread_pool.h"

namespace duet::onednn {

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
  std::unique_ptr<KVCache> create_kv_cache_rows(const KVCacheSpec& spec) override;

 private:
  KVTileRules tile_rules() const {
    return {.batch_invariant = batch_invariant_, .f16 = f16_cache_tiles_};
  }

  CpuPath path_;
  bool batch_invariant_;
  bool f16_cache_tiles_;
  std::shared_ptr<ThreadPool> pool_;
  std::shared_ptr<RowTilesCache> tiles_;  // the matmuls' repacked weights
  OnednnDevice device_;
  OnednnOps ops_;
};

}  // namespace duet::onednn
