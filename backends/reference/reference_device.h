// reference_device.h — the reference backend's device: ordinary host memory.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "duet/device.h"

namespace duet::reference {

// Host memory with 64-byte aligned allocations. Copies are memcpy and finish
// before they return, so synchronize() has nothing to wait for.
class ReferenceDevice final : public Device {
 public:
  std::string name() const override { return "cpu"; }
  bool host_accessible() const override { return true; }
  std::unique_ptr<Buffer> allocate(uint64_t bytes) override;
  void copy_from_host(void* device_dst, const void* host_src, uint64_t bytes) override;
  void copy_to_host(void* host_dst, const void* device_src, uint64_t bytes) override;
  void copy_on_device(void* device_dst, const void* device_src, uint64_t bytes) override;
  void synchronize() override {}
  // MemTotal and MemAvailable of /proc/meminfo; zeros if it cannot be read.
  MemoryInfo memory() const override;
};

}  // namespace duet::reference
