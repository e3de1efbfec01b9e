#include "reference_backend.h"

#include "duet/error.h"

namespace duet::reference {

std::unique_ptr<Attention> ReferenceBackend::create_attention(const std::string& impl,
                                                              const AttentionSpec&) {
  throw Error(ErrorKind::kConfig,
              "backend 'reference' provides no attention implementation named '" + impl +
                  "'; available: (none)");
}

std::unique_ptr<KVCache> ReferenceBackend::create_kv_cache(const KVCacheSpec& spec) {
  throw Error(ErrorKind::kConfig, "backend 'reference' provides no KV-cache storage named '" +
                                      spec.impl + "'; available: (none)");
}

}  // namespace duet::reference
