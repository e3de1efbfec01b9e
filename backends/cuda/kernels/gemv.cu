// gemv.cu — matrix-vector products over stored weights: the decode-time
// matmul, where each weight is read once for a few rows of activations and
// the speed is that of reading the weights.
//
// One warp per weight row, four rows per block. For a block format each lane
// takes whole 32-element blocks (lane, lane + 32, ...; for a K-quant, eighths
// of its super-blocks), so a warp reads a contiguous stretch of the row per
// step; for f32/f16/bf16 each lane takes
// single elements, which is coalesced as is. A warp multiplies its weight
// row with a chunk of up to kGemvChunkRows rows of x (kernel_args.h), each
// with its own f32 partial sums, reduced across the warp with shuffles; a
// row of x gets the same operations in any chunk, so its results are the
// same bits alone or in a batch. Chunks of one weight row are neighbouring
// blocks, so the weights come from L2 after the first. Up to
// kMaxGemvSegments matrices sharing x (Q, K, V; gate, up) run in one launch:
// the grid is their row blocks laid end to end.
#include "common.cuh"
#include "formats.cuh"

namespace duet::cuda {
namespace {

constexpr int kWarps = 4;

// std::array has no device member functions, hence plain arrays.
struct GemvGrid {
  GemvSegment segments[kMaxGemvSegments];
  int64_t first_block[kMaxGemvSegments + 1] = {};  // block index where segment s starts
  int count = 0;
};

// Loads x[0..31] (16-byte aligned when kAligned) into registers.
template <bool kAligned>
__device__ __forceinline__ void load32(const float* x, float (&v)[32]) {
  if constexpr (kAligned) {
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const float4 f = reinterpret_cast<const float4*>(x)[i];
      v[4 * i] = f.x;
      v[4 * i + 1] = f.y;
      v[4 * i + 2] = f.z;
      v[4 * i + 3] = f.w;
    }
  } else {
#pragma unroll
    for (int i = 0; i < 32; ++i) v[i] = x[i];
  }
}

// Where a block's warps work: weight rows of one segment and a chunk of the
// rows of x. Block b covers weight-row block b / chunks and chunk b % chunks.
struct GemvPlace {
  int64_t r = 0;      // this warp's weight row
  int64_t first = 0;  // the chunk's first row of x
  int x_rows = 0;     // rows of x in the chunk, 1..kRows
};

template <int kRows>
__device__ __forceinline__ GemvPlace place(int64_t block, int64_t total_x_rows) {
  const int64_t chunks = (total_x_rows + kRows - 1) / kRows;
  GemvPlace p;
  p.r = (block / chunks) * kWarps + threadIdx.x / 32;
  p.first = (block % chunks) * kRows;
  p.x_rows = static_cast<int>(min(static_cast<int64_t>(kRows), total_x_rows - p.first));
  return p;
}

// Row r of w ([rows, cols] of T) times rows 0..x_rows of x ([.., cols]),
// summed over the warp; every lane gets the results. Rows past x_rows
// (up to kRows) are left 0.
template <DType T, bool kAligned, int kRows>
__device__ __forceinline__ void row_dots(const void* w, int64_t r, const float* x, int64_t cols,
                                         int x_rows, int lane, float (&out)[kRows]) {
  const uint8_t* row = static_cast<const uint8_t*>(w) + r * row_bytes<T>(cols);
  float acc[kRows] = {};
  if constexpr (Format<T>::kBlocked) {
    float xv[32];
    for (int64_t b = lane; b < cols / 32; b += 32) {
#pragma unroll
      for (int i = 0; i < kRows; ++i) {
        if (i < x_rows) {
          load32<kAligned>(x + i * cols + 32 * b, xv);
          acc[i] += Format<T>::dot(row, b, xv);
        }
      }
    }
  } else {
    for (int64_t e = lane; e < cols; e += 32) {
      const float we = Format<T>::element(row, e);
#pragma unroll
      for (int i = 0; i < kRows; ++i) {
        if (i < x_rows) acc[i] += we * x[i * cols + e];
      }
    }
  }
#pragma unroll
  for (int i = 0; i < kRows; ++i) out[i] = warp_sum(acc[i]);
}

template <DType T, bool kAligned, int kRows>
__global__ void gemv_kernel(const float* x, int64_t cols, int64_t x_rows, GemvGrid grid) {
  wait_for_previous_kernel();
  // This block's segment, picked with constant indices: a kernel parameter
  // indexed at run time is first copied to the thread's local memory.
  GemvSegment seg = grid.segments[0];
  int64_t first_block = grid.first_block[0];
#pragma unroll
  for (int s = 1; s < kMaxGemvSegments; ++s) {
    if (s < grid.count && blockIdx.x >= grid.first_block[s]) {
      seg = grid.segments[s];
      first_block = grid.first_block[s];
    }
  }
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const GemvPlace p = place<kRows>(blockIdx.x - first_block, x_rows);
  if (p.r >= seg.rows) return;  // uniform across the warp
  float acc[kRows];
  row_dots<T, kAligned, kRows>(seg.w, p.r, x + p.first * cols, cols, p.x_rows, lane, acc);
  if (lane == 0) {
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      if (i < p.x_rows) seg.out[(p.first + i) * seg.rows + p.r] = acc[i];
    }
  }
}

// gate[i, r] = w_gate[r]·x[i] and up[i, r] = w_up[r]·x[i], then
// silu(gate) * up into gate (into_gate) or up: exactly what gemv, gemv,
// swiglu leave in memory, computed with the same expressions, in one launch.
template <DType T, bool kAligned, int kRows>
__global__ void gemv_swiglu_kernel(const float* x, int64_t cols, int64_t x_rows, const void* w_gate,
                                   const void* w_up, int64_t rows, float* gate, float* up,
                                   bool into_gate) {
  wait_for_previous_kernel();
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const GemvPlace p = place<kRows>(blockIdx.x, x_rows);
  if (p.r >= rows) return;  // uniform across the warp
  float g[kRows];
  float u[kRows];
  row_dots<T, kAligned, kRows>(w_gate, p.r, x + p.first * cols, cols, p.x_rows, lane, g);
  row_dots<T, kAligned, kRows>(w_up, p.r, x + p.first * cols, cols, p.x_rows, lane, u);
  if (lane == 0) {
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      if (i >= p.x_rows) continue;
      const float s = g[i] / (1.0f + expf(-g[i])) * u[i];  // as swiglu.cu computes it
      const int64_t at = (p.first + i) * rows + p.r;
      gate[at] = into_gate ? s : g[i];
      up[at] = into_gate ? u[i] : s;
    }
  }
}

// Rows of x per chunk for x_rows rows: the smallest of 1, 2, 4, 8 that
// holds them, else 8.
int chunk_rows(int64_t x_rows) {
  static_assert(kGemvChunkRows == 8);
  return x_rows == 1 ? 1 : x_rows == 2 ? 2 : x_rows <= 4 ? 4 : kGemvChunkRows;
}

int64_t chunks_of(int64_t x_rows) { return (x_rows + chunk_rows(x_rows) - 1) / chunk_rows(x_rows); }

// Calls f.template operator()<kRows>() with kRows = chunk_rows(x_rows).
template <typename F>
cudaError_t dispatch_chunk(int64_t x_rows, F&& f) {
  switch (chunk_rows(x_rows)) {
    case 1:
      return f.template operator()<1>();
    case 2:
      return f.template operator()<2>();
    case 4:
      return f.template operator()<4>();
    default:
      return f.template operator()<kGemvChunkRows>();
  }
}

// 16-byte loads of x need x and every row of it aligned.
bool aligned(const float* x, int64_t cols, int64_t x_rows) {
  return reinterpret_cast<uintptr_t>(x) % 16 == 0 && (x_rows == 1 || cols % 4 == 0);
}

}  // namespace

cudaError_t launch_gemv(const LaunchConfig& at, const float* x, int64_t cols, int64_t x_rows,
                        DType dtype, const GemvSegments& segments, int count) {
  if (x_rows < 1) return x_rows == 0 ? cudaSuccess : cudaErrorInvalidValue;
  const int64_t chunks = chunks_of(x_rows);
  GemvGrid grid;
  grid.count = count;
  for (int s = 0; s < count; ++s) {
    grid.segments[s] = segments[static_cast<size_t>(s)];
    grid.first_block[s + 1] =
        grid.first_block[s] + (segments[s].rows + kWarps - 1) / kWarps * chunks;
  }
  const int64_t blocks = grid.first_block[count];
  if (blocks == 0) return cudaSuccess;
  const bool a = aligned(x, cols, x_rows);
  return dispatch_chunk(x_rows, [&]<int kRows>() {
    return dispatch_format(dtype, [&]<DType T>() {
      auto kernel = a ? gemv_kernel<T, true, kRows> : gemv_kernel<T, false, kRows>;
      return launch(kernel, dim3(static_cast<unsigned int>(blocks)), dim3(kWarps * 32), 0, at, x,
                    cols, x_rows, grid);
    });
  });
}

cudaError_t launch_gemv_swiglu(const LaunchConfig& at, const float* x, int64_t cols, int64_t x_rows,
                               DType dtype, const void* w_gate, const void* w_up, int64_t rows,
                               float* gate, float* up, bool into_gate) {
  if (x_rows < 1) return x_rows == 0 ? cudaSuccess : cudaErrorInvalidValue;
  const int64_t blocks = (rows + kWarps - 1) / kWarps * chunks_of(x_rows);
  if (blocks == 0) return cudaSuccess;
  const bool a = aligned(x, cols, x_rows);
  return dispatch_chunk(x_rows, [&]<int kRows>() {
    return dispatch_format(dtype, [&]<DType T>() {
      auto kernel = a ? gemv_swiglu_kernel<T, true, kRows> : gemv_swiglu_kernel<T, false, kRows>;
      return launch(kernel, dim3(static_cast<unsigned int>(blocks)), dim3(kWarps * 32), 0, at, x,
                    cols, x_rows, w_gate, w_up, rows, gate, up, into_gate);
    });
  });
}

}  // namespace duet::cuda
