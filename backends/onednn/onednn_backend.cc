#include "onednn_backend.h"

#include <string>

#include "duet/error.h"
#include "onednn_attention.h"
#include "onednn_kv_cache.h"

namespace duet::onednn {

OnednnBackend::OnednnBackend(const BackendOptions& options, CpuPath path)
    : path_(path),
      batch_invariant_(options.batch_invariant),
      f16_cache_tiles_(options.f16_cache_tiles),
      pool_(std::make_shared<ThreadPool>(options.threads)),
      tiles_(std::make_shared<RowTilesCache>()),
      device_("onednn", tiles_),
      ops_(pool_, path, options, tiles_) {}

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
  return std::make_unique<OnednnKVCache>(spec, device_, path_, tile_rules());
}

std::unique_ptr<KVCache> OnednnBackend::create_kv_cache_rows(const KVCacheSpec& spec) {
  Support s = OnednnKVCache::check(spec);
  if (!s.ok()) throw Error(ErrorKind::kConfig, s.reasons.front());
  KVTileRules rules = tile_rules();
  rules.rows = true;
  return std::make_unique<OnednnKVCache>(spec, device_, path_, rules);
}

int32_t OnednnBackend::kv_cache_tile_slots(const KVCacheSpec& spec) const {
  return OnednnKVCache::tile_slots(spec, path_, tile_rules());
}

}  // namespace duet::onednn
