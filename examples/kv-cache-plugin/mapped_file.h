// A file created at a path, its whole size reserved on disk up front, and
// mapped shared into memory: storage that may be larger than RAM, where the
// kernel pages rows in and out.
#pragma once

#include <cstdint>
#include <string>

namespace duet_example {

class MappedFile {
 public:
  // Creates (or truncates) the regular file `path`, reserves `bytes` with
  // posix_fallocate — so a full disk or a file-size limit is an error here,
  // never a SIGBUS on first touch — and maps it read-write, zero-filled. The
  // file is unlinked at once unless `keep` (its space is freed when the
  // mapping goes). Errors name `key` (the option's path), `path`, the bytes
  // and the system's reason, and leave no file behind:
  //   duet::Error(kConfig)      the file cannot be created or is not regular;
  //   duet::Error(kOutOfMemory) the space cannot be reserved or mapped.
  // A process whose RLIMIT_FSIZE is below `bytes` must ignore SIGXFSZ to get
  // the error rather than the signal's default (termination).
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
