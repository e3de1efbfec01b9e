// duet/device.h — memory of one compute device, owned by a backend.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "duet/export.h"

namespace duet {

// One allocation on a device. Destroying it frees the memory. `data()` is a
// device pointer: host code may dereference it only if the owning Device
// reports host_accessible().
class DUET_API Buffer {
 public:
  virtual ~Buffer() = default;
  virtual void* data() = 0;
  virtual uint64_t size() const = 0;
};

// A Buffer of `size` bytes at `data` that `release(data, size)` gives back
// when it is destroyed: the buffer of a device whose memory comes from a
// pair of functions (aligned new and delete, mmap and munmap, cudaMalloc and
// cudaFree).
class ReleasingBuffer final : public Buffer {
 public:
  using Release = void (*)(void* data, uint64_t size);
  ReleasingBuffer(void* data, uint64_t size, Release release)
      : data_(data), size_(size), release_(release) {}
  ~ReleasingBuffer() override { release_(data_, size_); }
  ReleasingBuffer(const ReleasingBuffer&) = delete;
  ReleasingBuffer& operator=(const ReleasingBuffer&) = delete;

  void* data() override { return data_; }
  uint64_t size() const override { return size_; }

 private:
  void* data_;
  uint64_t size_;
  Release release_;
};

struct DUET_API MemoryInfo {
  uint64_t total_bytes = 0;  // 0 when unknown
  uint64_t free_bytes = 0;   // 0 when unknown
};

// A device's memory and transfers. Thread-safety: a Device may be used from
// one thread at a time unless its backend documents otherwise.
class DUET_API Device {
 public:
  virtual ~Device() = default;

  // Short name: "cpu", "cuda:0".
  virtual std::string name() const = 0;

  // True when device pointers are ordinary host pointers. Then the ops of
  // such a device's backend are also handed host memory that no Buffer of
  // it owns: the model file's mapped weights, and the caller's logits.
  virtual bool host_accessible() const = 0;

  // Allocates `bytes` (aligned to at least 64 bytes). On failure throws
  // duet::Error(kOutOfMemory) whose message says how much was requested and
  // how much was free. A zero-byte request returns a valid empty buffer.
  virtual std::unique_ptr<Buffer> allocate(uint64_t bytes) = 0;

  // Copies between host memory and device memory. Both ranges must lie inside
  // live allocations. They may be asynchronous; synchronize() waits for them.
  virtual void copy_from_host(void* device_dst, const void* host_src, uint64_t bytes) = 0;
  virtual void copy_to_host(void* host_dst, const void* device_src, uint64_t bytes) = 0;

  // Blocks until all work queued on this device has finished.
  virtual void synchronize() = 0;

  virtual MemoryInfo memory() const = 0;

  // ABI 1.1 (appended, so that a 1.0 device's vtable keeps its order).
  // Copies `bytes` from one device range to another (KV-cache blocks); the
  // ranges must not overlap. Queued like copy_from_host and copy_to_host.
  virtual void copy_on_device(void* device_dst, const void* device_src, uint64_t bytes) = 0;
};

}  // namespace duet
