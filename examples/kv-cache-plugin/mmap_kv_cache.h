// mmap_file: KV-cache storage whose slot rows live in a memory-mapped file
// (mapped_file.h) instead of the backend's memory, for host backends. The
// rows, their layout and every operation on them are core's RowKVCache: only
// the storage differs, handed to it as a Buffer over the mapping. So a cache
// of one dtype holds the same bytes as the backend's in-memory 'contiguous'
// cache, and gives the same logits.
#pragma once

#include <duet/backend.h>
#include <duet/options.h>
#include <duet/row_kv_cache.h>

#include <memory>
#include <string>

#include "mapped_file.h"

namespace duet_example {

struct MmapOptions {
  std::string key;         // the options' key path, for messages
  std::string path;        // the file to create; relative to the working directory
  uint64_t max_bytes = 0;  // the file's size limit; 0: none
  bool keep = false;       // leave the file behind (else unlinked once mapped)
};

// Reads `path` (required), `max_bytes` and `keep`, then options.finish().
// Throws duet::Error(kConfig) naming the key path on a bad value.
MmapOptions read_mmap_options(const duet::Options& options);

// Whether a cache for `spec` can be made with `options` on `backend`,
// creating nothing: the dtype and geometry (f32, f16, q8_0 rows), a host
// device, a path that is a new or regular file in a writable directory, and
// the file's size within max_bytes.
duet::Support check_mmap_kv_cache(duet::Backend& backend, const duet::KVCacheSpec& spec,
                                  const MmapOptions& options);

class MmapKVCache final : public duet::RowKVCache {
 public:
  // REQUIRES: check_mmap_kv_cache(backend, spec, options).ok(). Creates
  // and maps the file; throws as MappedFile does.
  MmapKVCache(duet::Backend& backend, const duet::KVCacheSpec& spec, const MmapOptions& options);
};

}  // namespace duet_example
