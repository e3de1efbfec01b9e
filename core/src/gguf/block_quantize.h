// block_quantize.h — 32 floats stored as one block, rounding exactly as
// ggml's reference quantizers do, so files Duet writes match files ggml
// writes (internal to core; duet::quantize_row is the public face). Each
// function reads kQK floats from x.
#pragma once

#include "duet/block_formats.h"

namespace duet::blocks {

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

}  // namespace duet::blocks
