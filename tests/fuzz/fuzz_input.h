// fuzz_input.h — helpers shared by the fuzz targets.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "duet/app/plugin_host.h"

namespace duet::fuzz {

// An anonymous in-memory file holding `data`, for APIs that take a path.
// Its path, /proc/self/fd/N, is valid until the object dies.
class MemoryFile {
 public:
  MemoryFile(const uint8_t* data, size_t size) : fd_(memfd_create("duet-fuzz", 0)) {
    if (fd_ < 0) std::abort();
    for (size_t done = 0; done < size;) {
      const ssize_t n = write(fd_, data + done, size - done);
      if (n <= 0) std::abort();
      done += static_cast<size_t>(n);
    }
  }
  ~MemoryFile() { close(fd_); }
  MemoryFile(const MemoryFile&) = delete;
  MemoryFile& operator=(const MemoryFile&) = delete;

  std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }

 private:
  int fd_;
};

// The folder of this fuzz binary's plugins and the model, from the build.
inline std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

// A plugin host with the standard sampler links loaded (duet-samplers.so
// from DUET_FUZZ_PLUGIN_DIR, else the build's plugin folder); aborts when
// they do not load. For LLVMFuzzerInitialize; never freed.
inline PluginHost* standard_samplers() {
  auto* host = new PluginHost;
  const std::string plugin =
      env_or("DUET_FUZZ_PLUGIN_DIR", DUET_BUILD_PLUGIN_DIR) + "/duet-samplers.so";
  if (!host->load(plugin).loaded) std::abort();
  return host;
}

}  // namespace duet::fuzz
