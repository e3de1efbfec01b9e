// cublas_library.h — the cuBLAS functions the backend calls, opened at run
// time instead of linked.
//
// The plugin host loads every plugin it finds, so a plugin's link-time
// dependencies are paid by every `duet` process, GPU or not. Linked
// normally, libcublas and libcublasLt (about 600 MB of files) were mapped
// and relocated each time: about 95 MiB more peak RSS for any pipeline on
// any backend. This library is opened when a cuda backend is created (after
// the probe found a device), so a machine without a GPU never opens it.
#pragma once

#include <cublas_v2.h>

namespace duet::cuda {

struct CublasLibrary {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasGetStatusName) status_name = nullptr;
  // cublas_api.h overloads cublasGemmEx for C++, so the type is spelled out.
  cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                            const void*, const void*, cudaDataType, int, const void*, cudaDataType,
                            int, const void*, void*, cudaDataType, int, cublasComputeType_t,
                            cublasGemmAlgo_t) = nullptr;

  // The soname this build was compiled against, e.g. "libcublas.so.13".
  static const char* soname();

  // The library, opened on the first call (thread-safe) and kept open for
  // the life of the process. It is looked for in the directory this build
  // found the CUDA toolkit in, then by soname through the dynamic loader's
  // search path (LD_LIBRARY_PATH, ld.so.cache). Throws duet::Error(kPlugin)
  // naming the library, the loader's message and the fix when it cannot be
  // opened or lacks one of the functions; every later call throws the same.
  static const CublasLibrary& get();
};

}  // namespace duet::cuda
