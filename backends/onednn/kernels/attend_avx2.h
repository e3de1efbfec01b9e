// kernels/attend_avx2.h — the two memory-bound halves of decode attention
// (VectorKernels::attend in vector_kernels.h) with AVX2 intrinsics: the
// AVX2 path's counterpart of attend_avx512.h, with blocks of 8 positions.
//
// The generic vector code of vector_kernels.cc widens an f16 cache with a
// dozen integer operations per 8 values (it has no vcvtph2ps), converts each
// q8_0 block's scale in scalar code at every use, and reduces every score on
// its own behind a chain of dependent FMAs. Here keys and values are widened
// by vcvtph2ps (q8_0 by vpmovsxbd and one multiply per 8 keys; q8_0 values
// only widened, their scales folded into the probabilities a block of
// positions at a time), keys once per block into a small staging area that
// all query heads of the group read, and the dot products of 8 positions
// are reduced together (vhaddps and one cross-lane add). Blocks are walked
// and prefetched as on AVX-512 (kernels/attend_blocks.h).
// The online-softmax step between the halves stays in vector_kernels.cc.
//
// Internal to the onednn backend. REQUIRES: an AVX2, FMA and F16C CPU;
// head_dim a multiple of 16 (32 for q8_0); the layout of
// VectorKernels::attend (position i, KV head g at byte base + i * stride +
// g * dtype_row_bytes(type, head_dim); type f32, f16 or q8_0).
#pragma once

#include <cstdint>

#include "duet/dtype.h"

namespace duet::onednn::detail {

// scores[h * n + i] = scale * q_h · k_i for the kv_heads * group query heads
// h (q_h at q + h * head_dim, group consecutive heads per KV head).
// `staging`: scratch for 8 * head_dim floats, where an f16 or q8_0 block of
// keys is widened once for all query heads of its group.
void attend_scores_avx2(const float* q, int32_t kv_heads, int32_t group, int32_t head_dim,
                        float scale, const void* k, DType type, int64_t stride, int64_t n,
                        float* scores, float* staging);

// acc[h * head_dim + d] += Σ_i probs[h * n + i] * v_i[d] for the same heads.
void attend_values_avx2(int32_t kv_heads, int32_t group, int32_t head_dim, const void* v,
                        DType type, int64_t stride, int64_t n, const float* probs, float* acc);

}  // namespace duet::onednn::detail
