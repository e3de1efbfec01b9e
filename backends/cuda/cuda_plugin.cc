// The cuda backend's plugin entry: the probe and the "cuda" backend.
//
// The CUDA runtime is linked statically and opens the driver (libcuda.so)
// only when first called, so this library loads on any machine; the probe
// then says why it cannot run where there is no driver or no device.
#include <cuda_runtime.h>

#include <cstdio>
#include <memory>
#include <string>

#include "cublas_library.h"
#include "cuda_backend.h"
#include "cuda_options.h"
#include "duet/error.h"
#include "duet/plugin.h"

namespace {

// Devices CUDA sees, or the reason it sees none ("no CUDA device: ...").
int device_count(std::string& reason) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    reason = std::string("no CUDA device: ") + cudaGetErrorString(status);
    return 0;
  }
  if (count == 0) reason = "no CUDA device: cudaGetDeviceCount() found none";
  return count;
}

int probe_cuda(char* reason, size_t reason_size) {
  std::string why;
  if (device_count(why) > 0) return 1;
  std::snprintf(reason, reason_size, "%s", why.c_str());
  return 0;
}

void register_cuda(duet::PluginRegistrar& registrar) {
  registrar.add_backend(
      "cuda", "NVIDIA GPUs: quantized gemv decode in CUDA graphs, cuBLAS f16 prefill",
      [](const duet::Options& options) -> std::unique_ptr<duet::Backend> {
        const duet::cuda::CudaOptions o = duet::cuda::parse_cuda_options(options);
        std::string why;
        const int count = device_count(why);
        if (count == 0) throw duet::Error(duet::ErrorKind::kPlugin, "backend 'cuda': " + why);
        if (o.device >= count) {
          throw duet::Error(duet::ErrorKind::kConfig,
                            options.path() + ".device: " + std::to_string(o.device) +
                                " but this machine has " + std::to_string(count) + " CUDA device" +
                                (count == 1 ? "" : "s") + "; expected 0.." +
                                std::to_string(count - 1));
        }
        // Opened here, not at load (see cublas_library.h): a missing cuBLAS
        // fails the pipeline's build, not its first prefill.
        (void)duet::cuda::CublasLibrary::get();
        return std::make_unique<duet::cuda::CudaBackend>(o);
      });
}

}  // namespace

DUET_DEFINE_PLUGIN("cuda", "0.1.0", "CUDA GPU backend", probe_cuda, register_cuda)
