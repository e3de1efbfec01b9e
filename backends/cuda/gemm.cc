#include "gemm.h"

#include <algorithm>

#include "cublas_library.h"
#include "cuda_error.h"

namespace duet::cuda {

Gemm::~Gemm() {
  if (handle_ != nullptr) (void)CublasLibrary::get().destroy(handle_);
}

void* Gemm::scratch(std::unique_ptr<Buffer>& buffer, uint64_t bytes) {
  if (!buffer || buffer->size() < bytes) {
    buffer.reset();
    buffer = device_.allocate(bytes);
  }
  return buffer->data();
}

void Gemm::run(const GemmCall& c, const LaunchConfig& at) {
  const CublasLibrary& blas = CublasLibrary::get();
  if (handle_ == nullptr) {
    check_cublas(blas.create(&handle_), "creating a handle");
    check_cublas(blas.set_stream(handle_, device_.stream()), "setting the stream");
  }
  // f16 operands for quantized weights only (see the header).
  const bool f16 = is_block_quantized(c.dtype);
  const uint64_t element = f16 ? 2 : 4;
  const cudaDataType_t type = f16 ? CUDA_R_16F : CUDA_R_32F;
  const auto k = static_cast<uint64_t>(c.k);

  const void* x = c.x;
  if (f16) {
    void* x16 = scratch(activations_, static_cast<uint64_t>(c.n) * k * element);
    check_cuda(launch_to_f16(at, c.x, c.n * c.k, x16), "launching the f16 conversion");
    x = x16;
  }
  // f32 weights are already in the operand type and are used in place.
  const bool in_place = c.dtype == DType::kF32;
  const int64_t panel_rows =
      in_place ? c.m
               : std::clamp<int64_t>(static_cast<int64_t>(kPanelBytes / (k * element)), 1, c.m);
  void* panel =
      in_place ? nullptr : scratch(panel_, static_cast<uint64_t>(panel_rows) * k * element);
  const uint64_t row_bytes = dtype_row_bytes(c.dtype, k).value_or(0);

  const float one = 1.0f;
  const float zero = 0.0f;
  for (int64_t r0 = 0; r0 < c.m; r0 += panel_rows) {
    const int64_t rows = std::min(panel_rows, c.m - r0);
    const void* w = static_cast<const uint8_t*>(c.w) + static_cast<uint64_t>(r0) * row_bytes;
    if (!in_place) {
      check_cuda(launch_dequantize(at, w, c.dtype, rows, c.k, f16, panel),
                 "launching the weight expansion");
      w = panel;
    }
    // Row-major out[n, m] is column-major outᵀ [m, n] = W[m, k] · xᵀ[k, n],
    // where row-major w [m, k] is the column-major [k, m] matrix Wᵀ (so
    // CUBLAS_OP_T) and row-major x [n, k] is column-major xᵀ. Panel rows
    // r0.. are rows r0.. of outᵀ: the output pointer moves by r0, ldc stays m.
    check_cublas(
        blas.gemm_ex(handle_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(rows),
                     static_cast<int>(c.n), static_cast<int>(c.k), &one, w, type,
                     static_cast<int>(c.k), x, type, static_cast<int>(c.k), &zero, c.out + r0,
                     CUDA_R_32F, static_cast<int>(c.m), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        "multiplying");
  }
}

}  // namespace duet::cuda
