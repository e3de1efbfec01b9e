// kv_store.cu — writes a step's new K and V rows into their cache slots.
#include "common.cuh"

namespace duet::cuda {
namespace {

constexpr int kThreads = 256;

// One block per row; threads stride over the row's n_kv_heads * head_dim
// elements. The slot comes from device memory (see AttentionArgs).
__global__ void kv_store_kernel(KvStoreArgs a) {
  wait_for_previous_kernel();
  const int64_t i = blockIdx.x;
  const int64_t n = a.row_elements;
  const int64_t slot = a.row_slot[i];
  for (int64_t e = threadIdx.x; e < n; e += kThreads) {
    a.k_cache[slot * n + e] = a.k[i * n + e];
    a.v_cache[slot * n + e] = a.v[i * n + e];
  }
}

}  // namespace

cudaError_t launch_kv_store(const LaunchConfig& at, const KvStoreArgs& args) {
  if (args.n_tokens == 0) return cudaSuccess;
  return launch(kv_store_kernel, dim3(static_cast<unsigned int>(args.n_tokens)), dim3(kThreads), 0,
                at, args);
}

}  // namespace duet::cuda
