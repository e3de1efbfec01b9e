// duet/host_device.h — a Device over ordinary host memory, for backends
// that compute on the CPU.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "duet/device.h"
#include "duet/export.h"

namespace duet {

// How a HostDevice obtains its memory.
enum class HostMemory {
  // Aligned operator new: what AddressSanitizer watches for overruns. A
  // request larger than MemAvailable is refused up front, because Linux
  // overcommits and would kill the process when the pages are touched.
  kHeap,
  // Page-aligned anonymous mappings whose pages are zero and become
  // resident only when first written: a KV cache sized for 2,048 tokens
  // costs memory only for the positions a run fills.
  kLazyPages,
};

// Host memory named "cpu". Allocations are aligned to at least 64 bytes; a
// zero-byte allocation still has a unique pointer. Copies are memcpy and
// finish before they return, so synchronize() has nothing to wait for.
// memory() reads MemTotal and MemAvailable of /proc/meminfo (zeros if it
// cannot). Thread-safe.
class DUET_API HostDevice : public Device {
 public:
  // `backend` names the backend in allocation errors.
  HostDevice(std::string backend, HostMemory memory);

  std::string name() const override { return "cpu"; }
  bool host_accessible() const override { return true; }
  // Throws duet::Error(kOutOfMemory) naming the request, what the host has
  // available and what to shrink.
  std::unique_ptr<Buffer> allocate(uint64_t bytes) override;
  void copy_from_host(void* device_dst, const void* host_src, uint64_t bytes) override;
  void copy_to_host(void* host_dst, const void* device_src, uint64_t bytes) override;
  void copy_on_device(void* device_dst, const void* device_src, uint64_t bytes) override;
  void synchronize() override {}
  MemoryInfo memory() const override;

 private:
  [[noreturn]] void out_of_memory(uint64_t bytes) const;

  std::string backend_;
  HostMemory memory_;
};

}  // namespace duet
