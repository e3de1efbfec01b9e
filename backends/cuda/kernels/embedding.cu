// embedding.cu — gathers table rows for token ids, expanding their format.
#include "common.cuh"
#include "formats.cuh"

namespace duet::cuda {
namespace {

// One block per id; threads stride over the row's elements.
template <DType T>
__global__ void embedding_kernel(const uint8_t* table, int64_t dim, const int32_t* ids,
                                 float* out) {
  wait_for_previous_kernel();
  const int64_t i = blockIdx.x;
  const uint8_t* row = table + static_cast<int64_t>(ids[i]) * row_bytes<T>(dim);
  for (int64_t e = threadIdx.x; e < dim; e += blockDim.x)
    out[i * dim + e] = Format<T>::element(row, e);
}

}  // namespace

cudaError_t launch_embedding(const LaunchConfig& at, const void* table, DType dtype, int64_t dim,
                             const int32_t* ids, int64_t n, float* out) {
  if (n == 0) return cudaSuccess;
  return dispatch_format(dtype, [&]<DType T>() {
    return launch(embedding_kernel<T>, dim3(static_cast<unsigned int>(n)), dim3(256), 0, at,
                  static_cast<const uint8_t*>(table), dim, ids, out);
  });
}

}  // namespace duet::cuda
