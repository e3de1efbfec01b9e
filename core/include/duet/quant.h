// duet/quant.h — conversion between f32 and the stored weight formats.
//
// The block formats are ggml's, byte for byte, laid out in
// duet/block_formats.h: a row of n elements is n / block_size consecutive
// blocks (32 elements for q4_0 ... q8_0, 256 for the K-quants).
// Every function is pure and thread-safe.
#pragma once

#include <cstdint>

#include "duet/dtype.h"
#include "duet/export.h"

namespace duet {

// IEEE 754 binary16 <-> binary32. f32_to_f16 rounds to nearest, ties to even;
// values beyond the f16 range become ±inf, values below half the smallest
// subnormal become ±0, and a NaN stays a (quiet) NaN.
DUET_API float f16_to_f32(uint16_t h) noexcept;
DUET_API uint16_t f32_to_f16(float f) noexcept;

// bfloat16 (the upper half of a binary32) <-> binary32. f32_to_bf16 rounds to
// nearest, ties to even, and keeps NaN a (quiet) NaN.
DUET_API float bf16_to_f32(uint16_t h) noexcept;
DUET_API uint16_t f32_to_bf16(float f) noexcept;

// Expands `n` elements of `type` stored at `src` into `dst`, with ggml's
// float operations in ggml's order, so that the values equal gguf-py's
// `gguf.quants.dequantize` bit for bit. Supports f32, f16, bf16 and every
// block type (q4_0, q4_1, q5_0, q5_1, q8_0, iq4_nl, q2_k, q3_k, q4_k, q5_k,
// q6_k, q8_k). Throws duet::Error(kInternal) for i32 or when n is not a multiple of
// the type's block size: callers validate both first, so either is a bug.
DUET_API void dequantize_row(DType type, const void* src, float* dst, int64_t n);

// Stores `n` elements of `src` as `type` at `dst` (dtype_row_bytes(type, n)
// bytes), rounding exactly as ggml's reference quantizers (those llama.cpp's
// llama-quantize uses without an importance matrix) do, so files Duet writes
// match files ggml writes:
//   q4_0: d = v / -8 where v is the element of largest magnitude,
//         q = min(15, trunc(x / d + 8.5));
//   q4_1: d = (max - min) / 15, m = min, q = min(15, trunc((x - min) / d + 0.5));
//   q5_0, q5_1: as q4_0 and q4_1 with 16 and 31 for 8 and 15;
//   q8_0: d = max|x| / 127, q = round(x / d);
//   q2_k, q3_k, q4_k, q5_k, q6_k: each sub-block's scale (and minimum) by
//         ggml's search (weighted least squares; q2_k weighs absolute error,
//         q3_k moves one level at a time), stored against the super-block's
//         f16 scales, then every element rounded against its decoded scale;
//   iq4_nl: the scale by ggml's search over 15 candidates (weights x²), each
//         element at its nearest table level.
// (An all-zero block has d = 0 and every q at its zero point.) Supports f32,
// f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, iq4_nl and q2_k to q6_k; throws
// duet::Error(kInternal) for any other type and for a partial block. `src`
// must be finite (callers check; the K-quant searches assume it).
DUET_API void quantize_row(DType type, const float* src, void* dst, int64_t n);

}  // namespace duet
