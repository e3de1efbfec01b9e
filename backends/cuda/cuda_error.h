// cuda_error.h — CUDA and cuBLAS status codes turned into duet::Error.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

namespace duet::cuda {

// Throws duet::Error(kPlugin) "CUDA error while WHAT: MESSAGE (NAME)" unless
// `status` is cudaSuccess. `what` says what the backend was doing, e.g.
// "launching attention".
void check_cuda(cudaError_t status, const char* what);

// The same for cuBLAS: "cuBLAS error while WHAT: NAME".
void check_cublas(cublasStatus_t status, const char* what);

}  // namespace duet::cuda
