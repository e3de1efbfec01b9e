// reference_backend.h — the reference backend: host memory and plain C++
// ops, attention and KV-cache storage, the yardstick for every other backend.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "duet/backend.h"
#include "duet/host_device.h"
#include "reference_ops.h"

namespace duet::reference {

class ReferenceBackend final : public Backend {
 public:
  std::string name() const override { return "reference"; }
  Device& device() override { return device_; }
  Ops& ops() override { return ops_; }

  std::vector<std::string> attention_impls() const override { return {"full"}; }
  std::unique_ptr<Attention> create_attention(const std::string& impl,
                                              const AttentionSpec& spec) override;
  std::vector<std::string> kv_cache_impls() const override { return {"contiguous"}; }
  Support check_kv_cache(const KVCacheSpec& spec) const override;
  std::unique_ptr<KVCache> create_kv_cache(const KVCacheSpec& spec) override;

 private:
  HostDevice device_{"reference", HostMemory::kHeap};
  ReferenceOps ops_;
};

}  // namespace duet::reference
