// A file created at a path, its whole size reserved on disk up front, and
// mapped shared into memory: storage that may be larger than RAM, where the
// kernel pages rows in and out.
#pragma once

#include <cstdint>
#include <string>

namespace duet_example {

class MappedFile {
 public:
  // Creates the regular file `path` (which must not exist: no file is ever
  // overwritten, and no two caches map one file), reserves `bytes` with
  // posix_fallocate — so a full disk is an error here, never a SIGBUS on
  // first touch — and maps it read-write, zero-filled. The file is unlinked
  // at once unless `keep` (its space is freed when the mapping goes).
  // Errors name `key` (the option's path), `path`, the bytes and the
  // system's reason, and leave no file behind:
  //   duet::Error(kConfig)      the file exists or cannot be created;
  //   duet::Error(kOutOfMemory) the process's file-size limit (ulimit -f)
  //                             is below `bytes`, or the space cannot be
  //                             reserved or mapped.
  MappedFile(const std::string& key, const std::string& path, uint64_t bytes, bool keep);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  void* data() const { return data_; }
  uint64_t size() const { return size_; }

 private:
  void* data_ = nullptr;
  uint64_t size_ = 0;
};

}  // namespace duet_example
