// kernels/attend_tiles.h — the two halves of decode attention over a q8_0
// cache in tiles (kernels/kv_tiles.h), with AVX-512 VNNI.
//
// Keys: each query head is rounded to two int8 terms per block of 32 (q ≈
// s·(hi + lo/256), about 16 bits, as Q8Activations does for the matvecs),
// and vpdpbusd multiplies four query bytes, broadcast, by the four key
// bytes each lane of a tile's key vector holds: the scores of 16 positions
// with no shuffles and no horizontal sums. Scores come out within ~1e-5
// relative of f32 arithmetic on the same keys.
//
// Values: each probability times its value block's scale is rounded to
// int16 against the tile's largest probability of that head times its
// largest scale of that block (15 bits), and vpdpwssd multiplies a pair of
// them, broadcast, by the sign-extended values of two neighbouring
// positions: 32 multiply-adds per instruction, the int32 sums of a tile
// scaled back once.
//
// Positions are tile slots lane0, lane0 + 1, ... (n of them, crossing into
// the following tiles, tile_bytes apart); `tiles` points at the first KV
// head's part of the first tile. Query head h is q[h * head_dim ..), group
// consecutive query heads per KV head, as VectorKernels::attend.
//
// Internal to the onednn backend. REQUIRES: an AVX-512 (F, BW, VL) VNNI
// CPU; head_dim a multiple of 32; lane0 in [0, 16); n ≥ 1; every tile the
// run touches readable whole for the kv_heads heads (slots before lane0
// and after the run included: they are read and given no weight); finite
// queries and probabilities.
#pragma once

#include <cstdint>

namespace duet::onednn::detail {

// scores[h * n + i] = scale * q_h · k_i for the kv_heads * group query
// heads h and positions i < n. `staging`: scratch for at least kv_heads *
// group * head_dim floats (the query terms).
void attend_tile_scores_vnni(const float* q, int32_t kv_heads, int32_t group, int32_t head_dim,
                             float scale, const uint8_t* tiles, int64_t tile_bytes, int32_t lane0,
                             int64_t n, float* scores, float* staging);

// acc[h * head_dim + d] += Σ_i probs[h * n + i] * v_i[d] for the same heads.
// REQUIRES: probs ≥ 0, finite.
void attend_tile_values_vnni(int32_t kv_heads, int32_t group, int32_t head_dim,
                             const uint8_t* tiles, int64_t tile_bytes, int32_t lane0, int64_t n,
                             const float* probs, float* acc);

}  // namespace duet::onednn::detail
