#include "cuda_error.h"

#include <string>

#include "cublas_library.h"
#include "duet/error.h"

namespace duet::cuda {

void check_cuda(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return;
  // Clears the runtime's last-error state for errors that are not sticky,
  // so a later, unrelated check does not report this one again.
  (void)cudaGetLastError();
  throw Error(ErrorKind::kPlugin, std::string("CUDA error while ") + what + ": " +
                                      cudaGetErrorString(status) + " (" + cudaGetErrorName(status) +
                                      ")");
}

void check_cublas(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw Error(ErrorKind::kPlugin, std::string("cuBLAS error while ") + what + ": " +
                                      CublasLibrary::get().status_name(status));
}

}  // namespace duet::cuda
