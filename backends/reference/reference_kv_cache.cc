#include "reference_kv_cache.h"

#include <cstring>

namespace duet::reference {

Support ReferenceKVCache::check(const KVCacheSpec& spec) {
  return check_contiguous_kv_cache(spec, "reference", {DType::kF32, DType::kF16, DType::kQ8_0});
}

ReferenceKVCache::ReferenceKVCache(const KVCacheSpec& spec, HostDevice& device)
    : RowKVCache(spec, device) {
  std::memset(storage().data(), 0, storage().size());
}

}  // namespace duet::reference
