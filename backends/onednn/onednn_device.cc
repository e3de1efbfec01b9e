#include "onednn_device.h"

#include <utility>

namespace duet::onednn {
namespace {

// A buffer that drops the cache's tiles of its memory when it is released.
// The cache is shared, so a buffer that outlives the backend is safe.
class ForgettingBuffer final : public Buffer {
 public:
  ForgettingBuffer(std::unique_ptr<Buffer> inner, std::shared_ptr<RowTilesCache> tiles)
      : inner_(std::move(inner)), tiles_(std::move(tiles)) {}
  ~ForgettingBuffer() override { tiles_->forget(inner_->data(), inner_->size()); }
  ForgettingBuffer(const ForgettingBuffer&) = delete;
  ForgettingBuffer& operator=(const ForgettingBuffer&) = delete;

  void* data() override { return inner_->data(); }
  uint64_t size() const override { return inner_->size(); }

 private:
  std::unique_ptr<Buffer> inner_;
  std::shared_ptr<RowTilesCache> tiles_;
};

}  // namespace

OnednnDevice::OnednnDevice(std::string backend, std::shared_ptr<RowTilesCache> tiles)
    : HostDevice(std::move(backend), HostMemory::kLazyPages), tiles_(std::move(tiles)) {}

std::unique_ptr<Buffer> OnednnDevice::allocate(uint64_t bytes) {
  return std::make_unique<ForgettingBuffer>(HostDevice::allocate(bytes), tiles_);
}

void OnednnDevice::copy_from_host(void* device_dst, const void* host_src, uint64_t bytes) {
  tiles_->forget(device_dst, bytes);
  HostDevice::copy_from_host(device_dst, host_src, bytes);
}

void OnednnDevice::copy_on_device(void* device_dst, const void* device_src, uint64_t bytes) {
  tiles_->forget(device_dst, bytes);
  HostDevice::copy_on_device(device_dst, device_src, bytes);
}

}  // namespace duet::onednn
