#include "reference_backend.h"

#include "duet/error.h"
#include "reference_attention.h"
#include "reference_kv_cache.h"

namespace duet::reference {

std::unique_ptr<Attention> ReferenceBackend::create_attention(const std::string& impl,
                                                              const AttentionSpec& spec) {
  if (impl != "full") {
    throw Error(ErrorKind::kConfig,
                "backend 'reference' provides no attention implementation named '" + impl +
                    "'; available: 'full'");
  }
  return std::make_unique<ReferenceAttention>(spec);
}

Support ReferenceBackend::check_kv_cache(const KVCacheSpec& spec) const {
  return ReferenceKVCache::check(spec);
}

std::unique_ptr<KVCache> ReferenceBackend::create_kv_cache(const KVCacheSpec& spec) {
  Support s = ReferenceKVCache::check(spec);
  if (!s.ok()) throw Error(ErrorKind::kConfig, s.reasons.front());
  return std::make_unique<ReferenceKVCache>(spec, device_);
}

}  // namespace duet::reference
