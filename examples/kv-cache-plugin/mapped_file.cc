#include "mapped_file.h"

#include <duet/error.h>
#include <fcntl.h>
#include <sys/mman.h>
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
  OpenFile file{::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600), path};
  if (file.fd < 0) {
    const int error = errno;
    file.remove = false;  // nothing was created
    throw duet::Error(duet::ErrorKind::kConfig,
                      what + " cannot be created for the KV cache: " + std::strerror(error));
  }
  struct stat st {};
  if (::fstat(file.fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    file.remove = false;  // not ours to remove
    throw duet::Error(duet::ErrorKind::kConfig,
                      what + " is not a regular file; name a new file for the KV cache");
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
