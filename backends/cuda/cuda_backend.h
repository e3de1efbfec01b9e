// cuda_backend.h — the cuda backend: one CUDA device, its kernels, its
// attention and its KV-cache storage, with decode passes replayed as CUDA
// graphs (forward_pass.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cuda_device.h"
#include "cuda_ops.h"
#include "cuda_options.h"
#include "duet/backend.h"
#include "forward_pass.h"

namespace duet::cuda {

class CudaBackend final : public Backend {
 public:
  // Throws duet::Error(kPlugin) when CUDA cannot set up options.device.
  explicit CudaBackend(const CudaOptions& options);
  ~CudaBackend() override;

  std::string name() const override { return "cuda"; }
  Device& device() override { return device_; }
  Ops& ops() override { return ops_; }

  std::vector<std::string> attention_impls() const override { return {"full"}; }
  std::unique_ptr<Attention> create_attention(const std::string& impl,
                                              const AttentionSpec& spec) override;
  std::vector<std::string> kv_cache_impls() const override { return {"contiguous"}; }
  Support check_kv_cache(const KVCacheSpec& spec) const override;
  std::unique_ptr<KVCache> create_kv_cache(const KVCacheSpec& spec) override;

  void begin_forward(const StepBatch& step) override { pass_.begin(step); }
  void end_forward() override { pass_.end(); }

 private:
  CudaOptions options_;
  CudaDevice device_;
  ForwardPass pass_;
  CudaOps ops_;
};

}  // namespace duet::cuda
