// vector_kernels.h — the onednn backend's own SIMD loops (softmax, SwiGLU,
// weight and f16 expansion), compiled once per CpuPath.
//
// oneDNN brings its own run-time dispatch for matrix products and
// kernels/qgemv.h has the quantized products; these are the remaining loops
// over many elements: the exponentials of attention and of SwiGLU, and the
// expansion of quantized weight panels and f16 caches for GEMM. Each is
// written once, with GCC vector extensions, and instantiated for every
// CpuPath with that path's instruction set and vector width (16 floats for
// AVX-512, 8 for AVX2, 4 for SSE2). A path is selected only if the CPU runs
// it (kernels/cpu_features.h); the SSE2 copy runs on any x86-64.
//
// All functions are pure apart from their outputs and are thread-safe for
// disjoint outputs.
#pragma once

#include <cstdint>

#include "duet/dtype.h"
#include "kernels/cpu_features.h"

namespace duet::onednn {

// Partial softmax attention of `heads` query heads over some of the
// positions they see: max[h] is the largest scaled score, sum[h] = Σ
// exp(score - max[h]) and acc[h * head_dim + d] = Σ exp(score - max[h]) v[d].
// Parts over disjoint positions merge into the attention output.
struct SoftmaxPart {
  float* max;
  float* sum;
  float* acc;
};

struct VectorKernels {
  // Softmax of s[0, valid) in place; s[valid, width) becomes 0.
  // REQUIRES: 1 ≤ valid ≤ width.
  void (*softmax)(float* s, int64_t valid, int64_t width);
  // Folds n cached positions into `state`, the partial attention of
  // kv_heads * group query heads, each group of `group` consecutive heads
  // sharing one KV head: query head h is q[h * head_dim ..); KV head g of
  // position i has its key at byte k + i * stride + g * dtype_row_bytes(type,
  // head_dim) and its value likewise from v, as elements of `type` (f32, f16
  // or q8_0 blocks). The scores are scale * q·k. A fresh state is max = -inf,
  // sum = 0, acc = 0; calling this once per run of consecutive cache slots
  // gives the state of all of them (online softmax). Each position's keys
  // and values are read once, in order. `scores`: scratch for
  // kv_heads * group * (n + head_dim) + 16 * head_dim floats. Computes in
  // f32. REQUIRES: head_dim a multiple of 16 (of 32 for q8_0), n ≥ 1,
  // finite inputs.
  void (*attend)(const float* q, int32_t kv_heads, int32_t group, int32_t head_dim, float scale,
                 const void* k, const void* v, DType type, int64_t stride, int64_t n, float* scores,
                 SoftmaxPart state);
  // `attend` over a cache of `type` in tiles (kernels/kv_tiles.h): the n
  // positions from slot lane0 of the tiles at k and v (tile_bytes apart,
  // each pointing at the first KV head's part). q8_0 in integer arithmetic
  // (kernels/attend_tiles.h: scores within ~1e-5 relative, probabilities
  // rounded to 15 bits), on the VNNI path; f16 in f32 as attend
  // (kernels/attend_avx512.h), on both AVX-512 paths. Null on the others.
  // `scores`: scratch as for attend. REQUIRES: type one the path keeps in
  // tiles (OnednnKVCache::tile_slots), head_dim a multiple of 32, lane0 in
  // [0, 16), n ≥ 1, the tiles the run touches readable whole, finite
  // inputs.
  void (*attend_tiles)(const float* q, int32_t kv_heads, int32_t group, int32_t head_dim,
                       float scale, DType type, const uint8_t* k, const uint8_t* v,
                       int64_t tile_bytes, int32_t lane0, int64_t n, float* scores,
                       SoftmaxPart state);
  // Writes acc / sum of the merged parts to out[h * head_dim + d].
  // REQUIRES: head_dim a multiple of 16, n_parts ≥ 1.
  void (*merge)(const SoftmaxPart* parts, int64_t n_parts, int32_t heads, int32_t head_dim,
                float* out);
  // out[i] = silu(gate[i]) * up[i] for i in [0, n); out may alias either.
  void (*swiglu)(const float* gate, const float* up, float* out, int64_t n);
  // out[i] = gelu(gate[i]) * up[i] (GELU's tanh form, duet/ops.h) for i in
  // [0, n); out may alias either.
  void (*geglu)(const float* gate, const float* up, float* out, int64_t n);
  // Expands n elements (a multiple of 32) of q4_0, q4_1 or q8_0 blocks.
  void (*dequantize)(DType type, const void* src, float* dst, int64_t n);
  // dst[r * cols + c] = src[r * stride + c] for `rows` rows of `cols` finite
  // f16 values (cols a multiple of 16), exactly.
  void (*widen_f16)(const uint16_t* src, int64_t stride, int64_t rows, int64_t cols, float* dst);
  // dst[i] = src[i] as f16 for i in [0, n), n a multiple of 16, rounded as
  // duet::f32_to_f16 rounds: to nearest, ties to even, beyond the range to
  // ±inf, below it to subnormals and ±0 (a NaN stays a NaN).
  void (*narrow_f16)(const float* src, uint16_t* dst, int64_t n);
  // Stores n elements (a multiple of 32) as q8_0 blocks at dst, byte for
  // byte as duet::quantize_row(DType::kQ8_0, ...) stores finite values.
  void (*quantize_q8_0)(const float* src, void* dst, int64_t n);
  // Expands n elements of q5_0, q5_1, q4_k, q5_k or q6_k (whole blocks),
  // each value equal to duet::dequantize_row's (kernels/qgemv_kquant.cc).
  void (*expand_kquant)(DType type, const void* src, float* dst, int64_t n);
  // Rotates the `half` pairs of one head's vector v in place, pair j by the
  // angle whose cosine and sine are cs[2j] and cs[2j + 1]: pair j is
  // (v[2j], v[2j + 1]) when `adjacent`, else (v[j], v[j + half]); (a, b)
  // becomes (a·c − b·s, a·s + b·c), each computed in double (where the
  // products of floats are exact) and rounded once to float: the same on
  // every path, fused or not.
  void (*rope)(float* v, const float* cs, int64_t half, bool adjacent);
};

// Bytes of one KV head's head_dim elements in a cache slot of `type` (f32,
// f16, or q8_0 with head_dim a multiple of 32): the head stride of attend.
inline int64_t cache_head_bytes(DType type, int64_t head_dim) {
  return static_cast<int64_t>(*dtype_row_bytes(type, static_cast<uint64_t>(head_dim)));
}

// The kernels compiled for `path`. REQUIRES: path ≤ hardware_cpu_path().
const VectorKernels& vector_kernels(CpuPath path);

// q4_0, q4_1 and q8_0: the block formats `dequantize` expands; `expand_kquant`
// expands the kquant_kernel_type formats (kernels/qgemv.h).
inline bool has_vector_dequantize(DType t) {
  return t == DType::kQ4_0 || t == DType::kQ4_1 || t == DType::kQ8_0;
}

// Expands n elements of any weight type (n a multiple of the block size):
// q4_0, q4_1, q8_0 and the kquant_kernel_type formats (kernels/qgemv.h) with
// `kernels`, the others (bf16) with duet::dequantize_row.
void expand_weights(const VectorKernels& kernels, DType type, const void* src, float* dst,
                    int64_t n);

}  // namespace duet::onednn
