// mmap_file: KV-cache storage whose slot rows live in a memory-mapped file
// (mapped_file.h) instead of the backend's memory, for host backends. The
// rows, their layout and every operation on them are core's RowKVCache: only
// the allocation differs, made through a Device that forwards everything to
// the backend's device but allocates from the file. So a cache of one dtype
// holds the same bytes as the backend's in-memory 'contiguous' cache, and
// gives the same logits.
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

// `device`, allocating once from a MappedFile.
class FileDevice final : public duet::Device {
 public:
  FileDevice(duet::Device& device, MmapOptions options)
      : device_(device), options_(std::move(options)) {}

  std::string name() const override { return device_.name(); }
  bool host_accessible() const override { return device_.host_accessible(); }
  // Creates the file; a second allocation is duet::Error(kInternal).
  std::unique_ptr<duet::Buffer> allocate(uint64_t bytes) override;
  void copy_from_host(void* dst, const void* src, uint64_t bytes) override {
    device_.copy_from_host(dst, src, bytes);
  }
  void copy_to_host(void* dst, const void* src, uint64_t bytes) override {
    device_.copy_to_host(dst, src, bytes);
  }
  void copy_on_device(void* dst, const void* src, uint64_t bytes) override {
    device_.copy_on_device(dst, src, bytes);
  }
  void synchronize() override { device_.synchronize(); }
  duet::MemoryInfo memory() const override { return device_.memory(); }

 private:
  duet::Device& device_;
  MmapOptions options_;
  bool allocated_ = false;
};

// Holds the FileDevice so that it is built before, and outlives, the
// RowKVCache base that allocates through it.
struct FileDeviceHolder {
  FileDevice file_device;
};

class MmapKVCache final : private FileDeviceHolder, public duet::RowKVCache {
 public:
  // REQUIRES: check_mmap_kv_cache(backend, spec, options).ok(). Throws as
  // MappedFile does.
  MmapKVCache(duet::Backend& backend, const duet::KVCacheSpec& spec, MmapOptions options)
      : FileDeviceHolder{FileDevice(backend.device(), std::move(options))},
        RowKVCache(spec, file_device) {}
};

}  // namespace duet_example
