// commands.h — one kernel call of a forward pass, as plain data.
//
// Every op and attention call becomes a Command: the op and every value its
// launch depends on (device pointers, sizes, scalars), nothing else. Inside
// a forward pass the backend queues commands instead of launching them, so
// it can compare a decode pass with the one a CUDA graph holds (two passes
// whose commands compare equal launch exactly the same kernels with exactly
// the same arguments) and merge neighbouring commands into fewer launches
// (command_fusion.h). Launcher::run() turns a command into kernel launches.
// This header needs no CUDA header, so the host-side logic built on it is
// unit-tested without a GPU.
#pragma once

#include <cstdint>
#include <variant>

#include "duet/dtype.h"
#include "kernel_args.h"

namespace duet::cuda {

// out[i, :] = dequantize(table[ids[i], :]).
struct EmbeddingCall {
  const void* table = nullptr;
  DType dtype = DType::kF32;
  int64_t dim = 0;
  const int32_t* ids = nullptr;
  int64_t n = 0;
  float* out = nullptr;
  bool operator==(const EmbeddingCall&) const = default;
};

// Matrix-vector products sharing x ([x_rows, cols]): segments[0..count) of
// gemv, each segment's out [x_rows, rows]. A matmul of few rows is one
// segment; fusion merges neighbours.
struct GemvCall {
  const float* x = nullptr;
  int64_t cols = 0;
  DType dtype = DType::kF32;
  GemvSegments segments{};
  int32_t count = 0;
  int32_t x_rows = 1;
  bool operator==(const GemvCall&) const = default;
};

// Two GemvCall segments of equal rows (gate, up) followed by
// swiglu(gate, up, out) with out the gate or the up output: made only by
// fusion (launch_gemv_swiglu). x is [x_rows, cols]; gate and up are
// [x_rows, rows].
struct GemvSwiGLUCall {
  const float* x = nullptr;
  int64_t cols = 0;
  DType dtype = DType::kF32;
  const void* w_gate = nullptr;
  const void* w_up = nullptr;
  int64_t rows = 0;
  float* gate = nullptr;
  float* up = nullptr;
  bool into_gate = true;
  int32_t x_rows = 1;
  bool operator==(const GemvSwiGLUCall&) const = default;
};

// out[n, m] = x[n, k] · w[m, k]ᵀ, through cuBLAS (matmuls of more rows than
// a gemv takes).
struct GemmCall {
  const float* x = nullptr;
  const void* w = nullptr;
  DType dtype = DType::kF32;
  int64_t n = 0;
  int64_t m = 0;
  int64_t k = 0;
  float* out = nullptr;
  bool operator==(const GemmCall&) const = default;
};

struct RmsNormCall {
  const float* x = nullptr;
  const float* weight = nullptr;
  float eps = 0.0f;
  int64_t rows = 0;
  int64_t dim = 0;
  float* out = nullptr;
  bool operator==(const RmsNormCall&) const = default;
};

// add(a, b, sum) then rmsnorm(sum, weight, eps, out): made only by fusion.
struct AddRmsNormCall {
  const float* a = nullptr;
  const float* b = nullptr;
  float* sum = nullptr;
  const float* weight = nullptr;
  float eps = 0.0f;
  int64_t rows = 0;
  int64_t dim = 0;
  float* out = nullptr;
  bool operator==(const AddRmsNormCall&) const = default;
};

// RoPE of `first` and, when second.x is set (fusion), `second`.
struct RopeCall {
  RopeTarget first{};
  RopeTarget second{};
  const int32_t* positions = nullptr;
  int64_t rows = 0;
  int32_t head_dim = 0;
  float theta_base = 0.0f;
  bool halves = false;
  const float* freq_factors = nullptr;  // [head_dim / 2] or null
  bool operator==(const RopeCall&) const = default;
};

struct SwiGLUCall {
  const float* gate = nullptr;
  const float* up = nullptr;
  int64_t n = 0;
  float* out = nullptr;
  bool operator==(const SwiGLUCall&) const = default;
};

struct AddCall {
  const float* a = nullptr;
  const float* b = nullptr;
  int64_t n = 0;
  float* out = nullptr;
  bool operator==(const AddCall&) const = default;
};

struct AddBiasCall {
  const float* x = nullptr;
  const float* bias = nullptr;
  int64_t rows = 0;
  int64_t dim = 0;
  float* out = nullptr;
  bool operator==(const AddBiasCall&) const = default;
};

struct GeGLUCall {
  const float* gate = nullptr;
  const float* up = nullptr;
  int64_t n = 0;
  float* out = nullptr;
  bool operator==(const GeGLUCall&) const = default;
};

struct ScaleCall {
  const float* x = nullptr;
  float factor = 1.0f;
  int64_t n = 0;
  float* out = nullptr;
  bool operator==(const ScaleCall&) const = default;
};

// KVCache::write from an attention that is not the backend's own: the
// store alone.
struct KvStoreCall {
  KvStoreArgs store{};
  bool operator==(const KvStoreCall&) const = default;
};

// Attention::forward: store the new K/V (store.n_tokens rows; none when
// attend.k_new has the kernel store decode rows itself), then attend.
struct AttentionCall {
  KvStoreArgs store{};
  AttentionArgs attend{};
  bool operator==(const AttentionCall&) const = default;
};

using Command = std::variant<EmbeddingCall, GemvCall, GemvSwiGLUCall, GemmCall, RmsNormCall,
                             AddRmsNormCall, RopeCall, SwiGLUCall, AddCall, AddBiasCall, GeGLUCall,
                             ScaleCall, KvStoreCall, AttentionCall>;

}  // namespace duet::cuda
