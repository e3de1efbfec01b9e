// block_dequantize.h — one block of each block-quantized type expanded to
// f32, exactly as ggml's reference dequantizers round (internal to core;
// duet::dequantize_row is the public face).
//
// Each function writes BlockTraits<Block>::kElements floats to y. The float
// operations are ggml's, in ggml's order and without contraction, so the
// results equal gguf-py's `gguf.quants.dequantize` bit for bit (tests/
// quant_test.cc): scales are combined first ((d * sc) for a sub-block), then
// applied to each quant ((d * sc) * q - (dmin * m)).
#pragma once

#include "duet/block_formats.h"

namespace duet::blocks {

void dequantize_block(const BlockQ4_0& b, float* y);
void dequantize_block(const BlockQ4_1& b, float* y);
void dequantize_block(const BlockQ5_0& b, float* y);
void dequantize_block(const BlockQ5_1& b, float* y);
void dequantize_block(const BlockQ8_0& b, float* y);
void dequantize_block(const BlockIQ4_NL& b, float* y);
void dequantize_block(const BlockQ2_K& b, float* y);
void dequantize_block(const BlockQ3_K& b, float* y);
void dequantize_block(const BlockQ4_K& b, float* y);
void dequantize_block(const BlockQ5_K& b, float* y);
void dequantize_block(const BlockQ6_K& b, float* y);
void dequantize_block(const BlockQ8_K& b, float* y);

}  // namespace duet::blocks
