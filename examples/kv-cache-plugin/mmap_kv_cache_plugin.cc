// The memory-mapped KV-cache plugin: registers KV-cache storage 'mmap_file'
// for the host backends 'reference' and 'onednn'.
//
// YAML:
//   components:
//     kv_cache:
//       impl: mmap_file
//       capacity_tokens: 1048576
//       dtype: f16
//       options: {path: /scratch/kv.bin, max_bytes: 200000000000, keep: false}
#include <duet/error.h>
#include <duet/plugin.h>

#include "mmap_kv_cache.h"

namespace {

void register_components(duet::PluginRegistrar& r) {
  for (const char* backend : {"reference", "onednn"}) {
    r.add_kv_cache(
        backend, "mmap_file", "slot rows in a memory-mapped file (a cache larger than RAM)",
        [](duet::Backend& b, const duet::KVCacheSpec& spec, const duet::Options& o) {
          return duet_example::check_mmap_kv_cache(b, spec, duet_example::read_mmap_options(o));
        },
        [](duet::Backend& b, const duet::KVCacheSpec& spec, const duet::Options& o) {
          duet_example::MmapOptions options = duet_example::read_mmap_options(o);
          const duet::Support s = duet_example::check_mmap_kv_cache(b, spec, options);
          if (!s.ok()) throw duet::Error(duet::ErrorKind::kConfig, s.reasons.front());
          return std::unique_ptr<duet::KVCache>(new duet_example::MmapKVCache(b, spec, options));
        });
  }
}

}  // namespace

DUET_DEFINE_PLUGIN("mmap-kv-cache", "1.0.0", "KV-cache storage in a memory-mapped file", nullptr,
                   register_components)
