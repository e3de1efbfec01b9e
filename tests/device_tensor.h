// device_tensor.h — tensors on a backend's Device for the op tests: upload
// host data, allocate zeros, download f32 results.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "duet/device.h"
#include "duet/tensor.h"

namespace duet::testing {

// A device buffer and the view the ops see of it.
struct DeviceTensor {
  std::unique_ptr<Buffer> buffer;
  TensorView view;
};

inline DeviceTensor upload(Device& device, DType type, Shape shape, const void* host,
                           size_t bytes) {
  DeviceTensor t{device.allocate(bytes), {}};
  device.copy_from_host(t.buffer->data(), host, bytes);
  t.view = TensorView{t.buffer->data(), type, shape};
  return t;
}

template <typename T>
DeviceTensor upload(Device& device, DType type, Shape shape, const std::vector<T>& host) {
  return upload(device, type, shape, host.data(), host.size() * sizeof(T));
}

// An f32 tensor of zeros.
inline DeviceTensor zeros(Device& device, Shape shape) {
  return upload(device, DType::kF32, shape,
                std::vector<float>(static_cast<size_t>(shape.elements())));
}

// The f32 tensor t, copied to the host once the device is done.
inline std::vector<float> download(Device& device, const TensorView& t) {
  std::vector<float> host(static_cast<size_t>(t.elements()));
  device.copy_to_host(host.data(), t.data, host.size() * sizeof(float));
  device.synchronize();
  return host;
}

}  // namespace duet::testing
