// device_tensor.h — tensors on a backend's Device for the op tests: upload
// host data, allocate zeros, download f32 results, compare them bit for bit,
// run a matmul.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "duet/backend.h"
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

// Whether a and b hold the same floats bit for bit (memcmp, not a tolerance).
inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// out[n, m] = x[n, k] · w[m, k]ᵀ on `backend` (w of `type`), n = x.size() / k.
inline std::vector<float> matmul(Backend& backend, DType type, int64_t m, int64_t k,
                                 const std::vector<uint8_t>& w, const std::vector<float>& x) {
  const auto n = static_cast<int64_t>(x.size()) / k;
  Device& d = backend.device();
  DeviceTensor wt = upload(d, type, {m, k}, w);
  DeviceTensor xt = upload(d, DType::kF32, {n, k}, x);
  DeviceTensor out = zeros(d, {n, m});
  backend.ops().matmul(xt.view, wt.view, out.view);
  return download(d, out.view);
}

}  // namespace duet::testing
