// kernels/attend_avx512.h — the two memory-bound halves of decode attention
// (VectorKernels::attend in vector_kernels.h) with AVX-512 intrinsics.
//
// The generic vector code of vector_kernels.cc has neither vcvtph2ps nor a
// cheap horizontal sum: widening an f16 cache took six integer operations
// per 16 values and each score its own reduction. Here keys and values are
// widened by vcvtph2ps (q8_0 keys by vpmovsxbd and one scaling multiply;
// q8_0 values are only widened, their scales folded into the
// probabilities 16 positions at a time) — keys once per block into a small
// f32 staging area that all query heads of the group read — and the dot
// products of 16 positions are reduced together (a transposition tree of
// 15 additions). Positions are taken 16 at a time, all KV heads of a block
// at once, the next block prefetched into L1 and the pages from 16 KiB (at
// least two blocks) on into L2.
// (On VNNI CPUs a q8_0 cache is stored in tiles and read by
// kernels/attend_tiles.h instead.)
// The online-softmax step between the halves stays in vector_kernels.cc.
//
// Internal to the onednn backend. REQUIRES: an AVX-512 (F, BW, VL) CPU;
// head_dim a multiple of 16 (32 for q8_0); the layout of
// VectorKernels::attend (position i, KV head g at byte base + i * stride +
// g * dtype_row_bytes(type, head_dim); type f32, f16 or q8_0).
#pragma once

#include <cstdint>

#include "duet/dtype.h"

namespace duet::onednn::detail {

// scores[h * n + i] = scale * q_h · k_i for the kv_heads * group query heads
// h (q_h at q + h * head_dim, group consecutive heads per KV head).
// `staging`: scratch for 16 * head_dim floats, where an f16 or q8_0 block
// of keys is widened once for all query heads of its group.
void attend_scores_avx512(const float* q, int32_t kv_heads, int32_t group, int32_t head_dim,
                          float scale, const void* k, DType type, int64_t stride, int64_t n,
                          float* scores, float* staging);

// acc[h * head_dim + d] += Σ_i probs[h * n + i] * v_i[d] for the same heads.
void attend_values_avx512(int32_t kv_heads, int32_t group, int32_t head_dim, const void* v,
                          DType type, int64_t stride, int64_t n, const float* probs, float* acc);

// The same two halves over an f16 cache in tiles (kernels/kv_tiles.h,
// backend option f16_cache_tiles): the n positions from slot lane0 of the
// tiles at `tiles`, tile_bytes apart, pointing at the first KV head's
// part. The keys lie dimension-major, so a tile's 16 scores per query
// head are head_dim multiply-adds of a broadcast query element against 16
// widened keys — no reductions, no staging, and streams the hardware
// prefetchers follow (no software prefetch). Exact f16 widening, f32
// arithmetic: the row kernels' results up to the order of the additions.
// REQUIRES, beyond the above: lane0 in [0, 16), n ≥ 1, every tile the run
// touches readable whole (all 16 slots' keys are read).
void attend_tile_scores_f16_avx512(const float* q, int32_t kv_heads, int32_t group,
                                   int32_t head_dim, float scale, const uint8_t* tiles,
                                   int64_t tile_bytes, int32_t lane0, int64_t n, float* scores);
void attend_tile_values_f16_avx512(int32_t kv_heads, int32_t group, int32_t head_dim,
                                   const uint8_t* tiles, int64_t tile_bytes, int32_t lane0,
                                   int64_t n, const float* probs, float* acc);

}  // namespace duet::onednn::detail
