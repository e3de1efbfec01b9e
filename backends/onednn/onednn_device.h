// onednn_device.h — the onednn backend's device: host memory (lazily
// committed pages) that tells the row-tile cache when memory is freed or
// written, so that tiles made from a weight matrix die with it.
#pragma once

#include <memory>
#include <string>

#include "duet/host_device.h"
#include "row_tiles_cache.h"

namespace duet::onednn {

class OnednnDevice final : public HostDevice {
 public:
  OnednnDevice(std::string backend, std::shared_ptr<RowTilesCache> tiles);

  // HostDevice's buffers, each forgetting its tiles when released.
  std::unique_ptr<Buffer> allocate(uint64_t bytes) override;
  void copy_from_host(void* device_dst, const void* host_src, uint64_t bytes) override;
  void copy_on_device(void* device_dst, const void* device_src, uint64_t bytes) override;

 private:
  std::shared_ptr<RowTilesCache> tiles_;
};

}  // namespace duet::onednn
