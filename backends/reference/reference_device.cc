#include "reference_device.h"

#include <cstring>
#include <fstream>
#include <new>
#include <sstream>
#include <string>

#include "duet/error.h"

namespace duet::reference {
namespace {

constexpr std::align_val_t kAlignment{64};

class HostBuffer final : public Buffer {
 public:
  HostBuffer(void* data, uint64_t size) : data_(data), size_(size) {}
  ~HostBuffer() override { ::operator delete(data_, kAlignment); }
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;

  void* data() override { return data_; }
  uint64_t size() const override { return size_; }

 private:
  void* data_;
  uint64_t size_;
};

// "12884901888 bytes (12.0 GiB)"
std::string bytes_str(uint64_t bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(bytes);
  size_t unit = 0;
  while (v >= 1024.0 && unit + 1 < std::size(kUnits)) {
    v /= 1024.0;
    ++unit;
  }
  std::ostringstream s;
  s.precision(1);
  s << bytes << " bytes (" << std::fixed << v << " " << kUnits[unit] << ")";
  return s.str();
}

}  // namespace

std::unique_ptr<Buffer> ReferenceDevice::allocate(uint64_t bytes) {
  // Linux overcommits: a request larger than the memory the host has would
  // succeed here and get the process killed when the pages are touched, so
  // such requests are refused up front. operator new never returns null for
  // zero bytes, so an empty buffer still has a unique valid pointer.
  const MemoryInfo m = memory();
  const bool too_big = m.free_bytes != 0 && bytes > m.free_bytes;
  void* p =
      too_big ? nullptr : ::operator new(static_cast<size_t>(bytes), kAlignment, std::nothrow);
  if (p == nullptr) {
    throw Error(
        ErrorKind::kOutOfMemory,
        "device 'cpu' cannot allocate " + bytes_str(bytes) + "; the host has " +
            (m.free_bytes != 0 ? bytes_str(m.free_bytes) : std::string("an unknown amount")) +
            " available (MemAvailable in /proc/meminfo); use a smaller model, KV cache or batch");
  }
  return std::make_unique<HostBuffer>(p, bytes);
}

void ReferenceDevice::copy_from_host(void* device_dst, const void* host_src, uint64_t bytes) {
  std::memcpy(device_dst, host_src, static_cast<size_t>(bytes));
}

void ReferenceDevice::copy_to_host(void* host_dst, const void* device_src, uint64_t bytes) {
  std::memcpy(host_dst, device_src, static_cast<size_t>(bytes));
}

void ReferenceDevice::copy_on_device(void* device_dst, const void* device_src, uint64_t bytes) {
  std::memcpy(device_dst, device_src, static_cast<size_t>(bytes));
}

MemoryInfo ReferenceDevice::memory() const {
  MemoryInfo info;
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  // Lines look like "MemAvailable:   12345678 kB".
  while (in >> key >> kib) {
    if (key == "MemTotal:") info.total_bytes = kib * 1024;
    if (key == "MemAvailable:") info.free_bytes = kib * 1024;
    std::getline(in, unit);
  }
  return info;
}

}  // namespace duet::reference
