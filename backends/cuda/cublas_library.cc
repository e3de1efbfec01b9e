#include "cublas_library.h"

#include <dlfcn.h>

#include <string>

#include "duet/error.h"

namespace duet::cuda {
namespace {

#define DUET_STR2(x) #x
#define DUET_STR(x) DUET_STR2(x)
constexpr const char* kSoname = "libcublas.so." DUET_STR(DUET_CUBLAS_SOVERSION);
#undef DUET_STR
#undef DUET_STR2

// Resolves `name` into `fn`; false if the library lacks it.
template <class Fn>
bool resolve(void* handle, const char* name, Fn& fn) {
  fn = reinterpret_cast<Fn>(dlsym(handle, name));
  return fn != nullptr;
}

// Opens the library and resolves every function, or describes why not.
struct Loaded {
  CublasLibrary api;
  std::string error;  // empty when api is complete
};

Loaded load() {
  Loaded out;
  const std::string beside_toolkit = std::string(DUET_CUDA_LIBRARY_DIR) + "/" + kSoname;
  // Never closed: cuBLAS keeps per-process state for as long as handles may exist.
  void* handle = dlopen(beside_toolkit.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) handle = dlopen(kSoname, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    out.error = std::string("cannot open ") + kSoname + " (tried " + beside_toolkit +
                " and the loader's search path): " + (why ? why : "unknown error") +
                "; install cuBLAS from the CUDA toolkit or add its directory to LD_LIBRARY_PATH";
    return out;
  }
  CublasLibrary& a = out.api;
  for (const auto& [ok, name] :
       {std::pair{resolve(handle, "cublasCreate_v2", a.create), "cublasCreate_v2"},
        {resolve(handle, "cublasDestroy_v2", a.destroy), "cublasDestroy_v2"},
        {resolve(handle, "cublasSetStream_v2", a.set_stream), "cublasSetStream_v2"},
        {resolve(handle, "cublasGetStatusName", a.status_name), "cublasGetStatusName"},
        {resolve(handle, "cublasGemmEx", a.gemm_ex), "cublasGemmEx"}}) {
    if (!ok) {
      out.error = std::string(kSoname) + " has no function " + name +
                  "; install the cuBLAS of the CUDA toolkit this plugin was built with";
      return out;
    }
  }
  return out;
}

}  // namespace

const char* CublasLibrary::soname() { return kSoname; }

const CublasLibrary& CublasLibrary::get() {
  static const Loaded loaded = load();
  if (!loaded.error.empty()) throw Error(ErrorKind::kPlugin, loaded.error);
  return loaded.api;
}

}  // namespace duet::cuda
