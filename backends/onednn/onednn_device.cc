#include "onednn_device.h"

#include <sys/mman.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "duet/error.h"

namespace duet::onednn {
namespace {

class MappedBuffer final : public Buffer {
 public:
  MappedBuffer(void* data, uint64_t size) : data_(data), size_(size) {}
  ~MappedBuffer() override { munmap(data_, mapped_bytes(size_)); }
  MappedBuffer(const MappedBuffer&) = delete;
  MappedBuffer& operator=(const MappedBuffer&) = delete;

  // A zero-byte buffer still maps one page, so its pointer is unique.
  static size_t mapped_bytes(uint64_t size) { return static_cast<size_t>(size == 0 ? 1 : size); }

  void* data() override { return data_; }
  uint64_t size() const override { return size_; }

 private:
  void* data_;
  uint64_t size_;
};

// "1.5 GiB"
std::string gib(uint64_t bytes) {
  std::ostringstream s;
  s.precision(1);
  s << std::fixed << static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0) << " GiB";
  return s.str();
}

}  // namespace

std::unique_ptr<Buffer> OnednnDevice::allocate(uint64_t bytes) {
  void* p = mmap(nullptr, MappedBuffer::mapped_bytes(bytes), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    const MemoryInfo m = memory();
    throw Error(ErrorKind::kOutOfMemory,
                "device 'cpu' of backend 'onednn' cannot allocate " + std::to_string(bytes) +
                    " bytes (" + gib(bytes) + "); the host has " +
                    (m.free_bytes != 0 ? gib(m.free_bytes) : std::string("an unknown amount")) +
                    " available (MemAvailable in /proc/meminfo); use a smaller model or KV cache");
  }
  return std::make_unique<MappedBuffer>(p, bytes);
}

void OnednnDevice::copy_from_host(void* device_dst, const void* host_src, uint64_t bytes) {
  std::memcpy(device_dst, host_src, static_cast<size_t>(bytes));
}

void OnednnDevice::copy_to_host(void* host_dst, const void* device_src, uint64_t bytes) {
  std::memcpy(host_dst, device_src, static_cast<size_t>(bytes));
}

void OnednnDevice::copy_on_device(void* device_dst, const void* device_src, uint64_t bytes) {
  std::memcpy(device_dst, device_src, static_cast<size_t>(bytes));
}

MemoryInfo OnednnDevice::memory() const {
  MemoryInfo info;
  std::ifstream in("/proc/meminfo");
  std::string key, rest;
  uint64_t kib = 0;
  // Lines look like "MemAvailable:   12345678 kB".
  while (in >> key >> kib) {
    if (key == "MemTotal:") info.total_bytes = kib * 1024;
    if (key == "MemAvailable:") info.free_bytes = kib * 1024;
    std::getline(in, rest);
  }
  return info;
}

}  // namespace duet::onednn
