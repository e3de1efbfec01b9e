// onednn_device.h — the onednn backend's device: host memory.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "duet/device.h"

namespace duet::onednn {

// Host memory. Allocations are page-aligned anonymous mappings (so at least
// 64-byte aligned) whose pages are zero and become resident only when first
// written: a KV cache sized for 2,048 tokens costs memory only for the
// positions a run fills. Copies are memcpy and finish before they return,
// so synchronize() has nothing to wait for. Thread-safe.
class OnednnDevice final : public Device {
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

}  // namespace duet::onednn
