// reference_kv_cache.h — K and V of every layer in host memory: f32, f16 or
// q8_0.
#pragma once

#include "duet/host_device.h"
#include "duet/row_kv_cache.h"

namespace duet::reference {

// Core's slot-row storage (duet/row_kv_cache.h) in zeroed host memory.
class ReferenceKVCache final : public RowKVCache {
 public:
  // Why `spec` cannot be stored here; empty when it can.
  static Support check(const KVCacheSpec& spec);

  // REQUIRES: check(spec).ok(). Throws duet::Error(kOutOfMemory) when the
  // device cannot hold it.
  ReferenceKVCache(const KVCacheSpec& spec, HostDevice& device);
};

}  // namespace duet::reference
