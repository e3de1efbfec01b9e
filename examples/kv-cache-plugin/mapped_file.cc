#include "mapped_file.h"

#include <duet/error.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace duet_example {
namespace {

// Closes the descriptor and, on an error path, removes the file.
struct OpenFile {
  int fd = -1;
  std::string path;
  bool remove = true;
  ~OpenFile() {
    if (fd >= 0) ::close(fd);
    if (remove) ::unlink(path.c_str());
  }
};

}  // namespace

MappedFile::MappedFile(const std::string& key, const std::string& path, uint64_t bytes, bool keep) {
  const std::string what = key + ": '" + path + "'";
  // A file-size limit below the cache would end the process with SIGXFSZ
  // in posix_fallocate: refused here instead.
  struct rlimit limit {};
  if (::getrlimit(RLIMIT_FSIZE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY &&
      bytes > limit.rlim_cur) {
    throw duet::Error(duet::ErrorKind::kOutOfMemory,
                      what + ": the KV cache needs " + std::to_string(bytes) +
                          " bytes but this process may write files of at most " +
                          std::to_string(limit.rlim_cur) + " (ulimit -f); raise the limit");
  }
  // O_EXCL: never another file's bytes, and never one another cache maps.
  OpenFile file{::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600), path};
  if (file.fd < 0) {
    const int error = errno;
    file.remove = false;  // nothing was created
    throw duet::Error(duet::ErrorKind::kConfig,
                      what + " cannot be created for the KV cache: " + std::strerror(error) +
                          (error == EEXIST ? "; name a new file" : ""));
  }
  if (bytes > 0) {
    if (const int error = ::posix_fallocate(file.fd, 0, static_cast<off_t>(bytes)); error != 0) {
      throw duet::Error(duet::ErrorKind::kOutOfMemory,
                        what + ": cannot reserve " + std::to_string(bytes) +
                            " bytes for the KV cache: " + std::strerror(error));
    }
    void* data = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, file.fd, 0);
    if (data == MAP_FAILED) {
      throw duet::Error(
          duet::ErrorKind::kOutOfMemory,
          what + ": cannot map " + std::to_string(bytes) + " bytes: " + std::strerror(errno));
    }
    data_ = data;
    size_ = bytes;
  }
  file.remove = !keep;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(data_, size_);
}

}  // namespace duet_example
