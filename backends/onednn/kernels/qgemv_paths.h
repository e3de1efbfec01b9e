// kernels/qgemv_paths.h — the per-CpuPath entry points behind qgemv.h.
//
// Internal to duet_onednn_kernels. Each function is defined in the source file
// of its path, which alone is compiled with that path's instruction flags, so
// this header holds declarations only: an inline function here would be
// compiled with different flags in different files, and the linker could keep
// the AVX-512 copy for every caller.
#pragma once

#include <cstdint>

#include "duet/dtype.h"
#include "kernels/qgemv.h"
#include "kernels/row_tiles.h"
#include "kernels/row_tiles_amx.h"
#include "kernels/row_tiles_amx_bf16.h"

namespace duet::onednn::detail {

// One gemv call, validated by qgemv.cc: wtype is f32, f16 or a
// qgemv_block_type; w is row 0; rows are row_bytes apart; quantized types
// have k a multiple of their block and xq->k() == k.
struct GemvArgs {
  DType wtype;
  const uint8_t* w;
  int64_t row_bytes;
  int64_t k;
  const Q8Activations* xq;
  const float* x;
  float* y;
  int64_t row_begin;
  int64_t row_end;
  // Vectors: xq[0..n) (or x + i * k) with results at y + i * ldy. The
  // one-vector entry points read only the first.
  int64_t n = 1;
  int64_t ldy = 0;
};

void gemv_scalar(const GemvArgs& a);

// The 5-bit formats and the K-quants (qgemv_kquant.cc, built once per path).
void gemv_kquant_scalar(const GemvArgs& a);
void gemv_kquant_avx2(const GemvArgs& a);
void gemv_kquant_avx512(const GemvArgs& a);
void gemv_kquant_avx512_vnni(const GemvArgs& a);
// Their expansion to f32, n elements (whole blocks), each value equal to
// duet::dequantize_row's.
void expand_kquant_scalar(DType type, const void* src, float* dst, int64_t n);
void expand_kquant_avx2(DType type, const void* src, float* dst, int64_t n);
void expand_kquant_avx512(DType type, const void* src, float* dst, int64_t n);
void gemv_avx2(const GemvArgs& a);
void gemv_avx512(const GemvArgs& a);
void gemv_avx512_vnni(const GemvArgs& a);

// All a.n vectors at once, bit-identical per vector to the one-vector entry
// point of the same path. False (nothing written) where the path has no such
// kernel for a.wtype; the caller then runs the vectors one at a time.
bool gemv_many_avx512(const GemvArgs& a);
bool gemv_many_avx512_vnni(const GemvArgs& a);

// Q8Activations::quantize's work: fills q[0..k) and scales[0..2k/32) as
// qgemv.h describes (the padding is the caller's). All bit-identical.
void quantize_scalar(const float* x, int64_t k, int8_t* q, float* scales);
void quantize_avx2(const float* x, int64_t k, int8_t* q, float* scales);
// The AVX-512 paths quantize in one pass: q and scales as above and, with
// two terms, q_lo (unused with one) and the second term's scales (qgemv.cc's
// quantize_second_term), then half_scales (fill_half_scales) —
// bit-identical to those definitions; the padding and the derived forms
// stay the caller's.
void quantize_terms_avx512(const float* x, int64_t k, int terms, int8_t* q, int8_t* q_lo,
                           float* scales, float* half_scales);

// row_tiles_product's kernels, arguments validated: the n ≤ max activation
// rows xq[0..n), all of `terms` terms, against tiles [tile_begin, tile_end).
// row_tiles_vnni.cc (every tile type):
inline constexpr int64_t kRowTilesMaxVectorsVnni = 16;
void row_tiles_avx512_vnni(const RowTiles& tiles, const Q8Activations* xq, int64_t n, int terms,
                           float* y, int64_t ldy, int64_t tile_begin, int64_t tile_end);
// row_tiles_avx2.cc (nibble tiles but iq4_nl's, fifth-bit tiles and q8_0's
// bytes: row_tiles_kernel):
inline constexpr int64_t kRowTilesMaxVectorsAvx2 = 4;
void row_tiles_avx2(const RowTiles& tiles, const Q8Activations* xq, int64_t n, int terms, float* y,
                    int64_t ldy, int64_t tile_begin, int64_t tile_end);

// row_tiles_amx_kernel.cc (every tile type; the caller has checked
// amx_int8_usable()): row_tiles_product_amx's work.
void row_tiles_amx(const RowTiles& tiles, const AmxActivations& act, float* y, int64_t ldy,
                   int64_t tile_begin, int64_t tile_end);

// row_tiles_amx_bf16_kernel.cc (every tile type; the caller has checked
// amx_bf16_usable()): row_tiles_product_amx_bf16's work, and
// AmxBf16Rows::pack_row's: row i of its group from x, whose block b is
// first_block + b * AmxBf16Rows::kBlockBytes.
void row_tiles_amx_bf16(const RowTiles& tiles, const AmxBf16Rows& act, float* y, int64_t ldy,
                        int64_t tile_begin, int64_t tile_end);
void pack_row_amx_bf16(const float* x, int64_t blocks, uint8_t* first_block, int64_t i);

}  // namespace duet::onednn::detail
