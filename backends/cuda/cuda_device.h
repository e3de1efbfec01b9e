// cuda_device.h — one CUDA device's memory and the stream all of the
// backend's work is queued on.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "duet/device.h"

namespace duet::cuda {

// Every copy and kernel of the backend goes to one non-blocking stream, so
// work runs in the order it was queued and Device::synchronize() is a
// stream synchronisation. Transfers from or to pageable host memory return
// once the host side is no longer needed (cudaMemcpyAsync's rule), so a
// caller may reuse its host buffer at once. Thread-safety: one thread at a
// time; CUDA calls are made on device index() (cudaSetDevice).
class CudaDevice final : public Device {
 public:
  // Selects device `index` and creates the stream. Throws duet::Error
  // (kPlugin) when CUDA cannot.
  explicit CudaDevice(int32_t index);
  ~CudaDevice() override;
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  std::string name() const override { return "cuda:" + std::to_string(index_); }
  bool host_accessible() const override { return false; }

  // cudaMalloc. Throws duet::Error(kOutOfMemory) "CUDA device 0 (NAME)
  // cannot allocate X MiB: Y MiB free of Z MiB; lower
  // components.kv_cache.capacity_tokens or use a smaller model".
  std::unique_ptr<Buffer> allocate(uint64_t bytes) override;
  void copy_from_host(void* device_dst, const void* host_src, uint64_t bytes) override;
  void copy_to_host(void* host_dst, const void* device_src, uint64_t bytes) override;
  void synchronize() override;
  MemoryInfo memory() const override;

  // Device-to-device copy on the stream.
  void copy_on_device(void* device_dst, const void* device_src, uint64_t bytes) override;

  // Called before every transfer and synchronisation: the forward pass
  // uses it to launch the commands it has queued, so a transfer never
  // overtakes work that was asked for before it.
  void set_before_transfer(std::function<void()> hook) { before_transfer_ = std::move(hook); }

  cudaStream_t stream() const { return stream_; }
  int32_t index() const { return index_; }
  const std::string& product() const { return product_; }  // "NVIDIA H200"
  int compute_major() const { return compute_major_; }

  // Makes this device current on the calling thread.
  void activate() const;

 private:
  void before_transfer() {
    if (before_transfer_) before_transfer_();
  }

  int32_t index_;
  std::string product_;
  int compute_major_ = 0;
  cudaStream_t stream_ = nullptr;
  std::function<void()> before_transfer_;
};

}  // namespace duet::cuda
