#include "duet/host_device.h"

#include <sys/mman.h>

#include <cstring>
#include <fstream>
#include <new>
#include <utility>

#include "duet/byte_size.h"
#include "duet/error.h"

namespace duet {
namespace {

constexpr std::align_val_t kHeapAlignment{64};

// A zero-byte mapping still takes one page, so its pointer is unique.
size_t mapped_bytes(uint64_t size) { return static_cast<size_t>(size == 0 ? 1 : size); }

void release_heap(void* data, uint64_t) { ::operator delete(data, kHeapAlignment); }
void release_mapping(void* data, uint64_t size) { munmap(data, mapped_bytes(size)); }

}  // namespace

HostDevice::HostDevice(std::string backend, HostMemory memory)
    : backend_(std::move(backend)), memory_(memory) {}

std::unique_ptr<Buffer> HostDevice::allocate(uint64_t bytes) {
  if (memory_ == HostMemory::kLazyPages) {
    void* p = mmap(nullptr, mapped_bytes(bytes), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) out_of_memory(bytes);
    return std::make_unique<ReleasingBuffer>(p, bytes, release_mapping);
  }
  // operator new never returns null for zero bytes, so an empty buffer
  // still has a unique valid pointer.
  const MemoryInfo m = memory();
  if (m.free_bytes != 0 && bytes > m.free_bytes) out_of_memory(bytes);
  void* p = ::operator new(static_cast<size_t>(bytes), kHeapAlignment, std::nothrow);
  if (p == nullptr) out_of_memory(bytes);
  return std::make_unique<ReleasingBuffer>(p, bytes, release_heap);
}

void HostDevice::out_of_memory(uint64_t bytes) const {
  const MemoryInfo m = memory();
  throw Error(ErrorKind::kOutOfMemory,
              "device 'cpu' of backend '" + backend_ + "' cannot allocate " +
                  std::to_string(bytes) + " bytes (" + format_bytes(bytes) + "); the host has " +
                  (m.free_bytes != 0 ? format_bytes(m.free_bytes) : "an unknown amount") +
                  " available (MemAvailable in /proc/meminfo); use a smaller model, KV cache or "
                  "batch");
}

void HostDevice::copy_from_host(void* device_dst, const void* host_src, uint64_t bytes) {
  std::memcpy(device_dst, host_src, static_cast<size_t>(bytes));
}

void HostDevice::copy_to_host(void* host_dst, const void* device_src, uint64_t bytes) {
  std::memcpy(host_dst, device_src, static_cast<size_t>(bytes));
}

void HostDevice::copy_on_device(void* device_dst, const void* device_src, uint64_t bytes) {
  std::memcpy(device_dst, device_src, static_cast<size_t>(bytes));
}

MemoryInfo HostDevice::memory() const {
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

}  // namespace duet
