// block_quantize.h — floats stored as one block, rounding exactly as ggml's
// reference quantizers do, so files Duet writes match files ggml writes
// (internal to core; duet::quantize_row is the public face). The 32-element
// formats read kQK floats from x, the K-quants kQK_K.
#pragma once

#include "duet/block_formats.h"

namespace duet::blocks {

// The element of largest magnitude among x[0..n), with its sign: the first of
// equals, 0 when all are 0 (the scale every ggml quantizer starts from).
float signed_absmax(const float* x, int n);

// d = v / -8 where v is the element of largest magnitude,
// q = min(15, trunc(x / d + 8.5)).
BlockQ4_0 quantize_q4_0(const float* x);
// d = (max - min) / 15, m = min, q = min(15, trunc((x - min) / d + 0.5)).
BlockQ4_1 quantize_q4_1(const float* x);
// d = v / -16 where v is the element of largest magnitude,
// q = min(31, trunc(x / d + 16.5)).
BlockQ5_0 quantize_q5_0(const float* x);
// d = (max - min) / 31, m = min, q = min(31, trunc((x - min) / d + 0.5)).
BlockQ5_1 quantize_q5_1(const float* x);
// d = max|x| / 127, q = round(x / d) (halves away from zero).
BlockQ8_0 quantize_q8_0(const float* x);
// The scale by ggml's search: 15 candidates around -max/127 (max the
// element of largest magnitude, with its sign), each element at its nearest
// level, keeping the weighted (x²) least-squares scale that fits best; then
// every element at its nearest level for that scale (block_quantize_iq4.cc).
BlockIQ4_NL quantize_iq4_nl(const float* x);

// K-quants (block_quantize_k.cc): each sub-block's scale (and minimum) is
// found by a weighted least-squares search, stored as a 6-bit (q6_k: 8-bit)
// multiple of the super-block's f16 scale, and every element rounded again
// against the scale it decodes with.
// q2_k: 16 sub-blocks of 16, levels 0..3, x ≈ d*sc*q - dmin*m with 4-bit
// sc and m; the fit weighs each element by its magnitude and minimises the
// absolute error.
BlockQ2_K quantize_q2_k(const float* x);
// q3_k: 16 sub-blocks of 16, levels -4..3, x ≈ d*sc*q with 6-bit sc - 32.
BlockQ3_K quantize_q3_k(const float* x);
// q4_k: 8 sub-blocks of 32, levels 0..15, x ≈ d*sc*q - dmin*m.
BlockQ4_K quantize_q4_k(const float* x);
// q5_k: as q4_k with levels 0..31.
BlockQ5_K quantize_q5_k(const float* x);
// q6_k: 16 sub-blocks of 16, levels -32..31, x ≈ d*sc*q.
BlockQ6_K quantize_q6_k(const float* x);

}  // namespace duet::blocks
