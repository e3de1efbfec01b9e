// kernels/qgemv.h — matrix-vector products over ggml weight rows, for decode.
//
// Decode multiplies every weight matrix by one activation vector, so it is
// bound by how fast the weights stream from memory. These kernels read the
// weights in their stored ggml block format (see duet/quant.h), never
// dequantized, and do the arithmetic in integers: the activation vector is
// quantized once per product to 8-bit blocks of 32 (Q8Activations), and each
// weight block contributes
//   q4_1: dw*dx*Σ(qw*qx) + mw*sx        (x = dw*qw + mw)
//   q4_0: dw*dx*Σ(qw*qx) - 8*dw*sx      (x = dw*(qw - 8))
//   q8_0: dw*dx*Σ(qw*qx)
// where dx is the activation block's scale and sx = dx*Σqx. Compared with the
// f32 product this adds only the error of rounding x to 8 bits (relative
// error of each activation block ≤ 1/254 of its largest magnitude).
//
// Where 8 bits are too few (activations with outlier channels), a vector is
// quantized to two 8-bit terms, qx = 256*qa + qb with unit dx = d/256 (about
// 16 bits): the kernels form each block's integer sum as 256*Σ(qw*qa) +
// Σ(qw*qb) from the same unpacked weights, so the second term adds byte dot
// products but no second pass over the weights and no extra float work.
//
// Every CpuPath computes the same integer sums; paths differ only in the order
// of the float additions that combine blocks, so they agree to float rounding
// (qgemv_test bounds the difference by 1e-4 of the largest output). All
// functions are thread-safe for disjoint outputs.
#pragma once

#include <cstdint>
#include <memory>

#include "duet/block_formats.h"
#include "duet/dtype.h"
#include "kernels/cpu_features.h"

namespace duet::onednn {

// An activation vector of k floats (k a multiple of 32) quantized to blocks of
// 32: q[32b + i] = round(x[32b + i] * (1 / d[b])) with d[b] = max|x in block
// b| / 127 (round to nearest, ties to even; an all-zero block has d = 0 and
// q = 0, and so does a block so small that 1 / d overflows, max below
// ~4e-37), so |x - d*q| ≤ d/2.
// With two terms, also q_lo[32b + i] = round((x - d*q) * (256 / d)), clamped
// to ±127, so x ≈ (d/256) * (256*q + q_lo) within d/512 (about 1/65,000 of
// the block's largest magnitude), or d/256 where the clamp cut a remainder of
// about d/2; blocks so small that 256 / d overflows (max below ~1e-34) get
// q_lo = 0.
// Buffers grow on demand and are kept, so one object reused across decode
// steps allocates only on the first. Not thread-safe to quantize while another
// thread reads it; reading from many threads at once is safe.
class Q8Activations {
 public:
  // Kernels read whole vectors past the last block: q and scales are
  // zero-filled up to a multiple of kPadBlocks blocks.
  static constexpr int64_t kPadBlocks = 8;

  // Quantizes x[0..k) to `terms` (1 or 2) 8-bit terms. REQUIRES: k > 0,
  // k % 32 == 0, x finite. `path` picks the instructions used; every path
  // stores bit-identical results. REQUIRES: path ≤ hardware_cpu_path().
  // `derived_forms`: whether to fill the forms below, which only gemv_batch
  // of several vectors reads (it refuses vectors without them).
  void quantize(const float* x, int64_t k, CpuPath path = CpuPath::kScalar, int terms = 1,
                bool derived_forms = true);

  int64_t k() const { return k_; }
  int64_t blocks() const { return k_ / duet::blocks::kQK; }
  int terms() const { return terms_; }
  bool has_derived_forms() const { return derived_forms_; }
  // k int8 values, 64-byte aligned; block b starts at q() + 32 * b.
  const int8_t* q() const { return q_.get(); }
  // The second term, laid out as q(); null with one term.
  const int8_t* q_lo() const { return terms_ == 2 ? q_lo_.get() : nullptr; }
  // Two floats per block, interleaved so a kernel loads both with one vector:
  // scales()[2b] = u[b], the unit of the block's integer values (d[b] with
  // one term, d[b]/256 with two), and scales()[2b + 1] = s[b] = u[b] * Σ of
  // those values (Σq, or Σ(256*q + q_lo)).
  const float* scales() const { return scales_.get(); }
  // The same sum per 16-value half block, for weights whose scale changes
  // every 16 elements (row tiles of q2_k, q3_k, q6_k): half_scales()[2b + h]
  // = u[b] * Σ of the values of half h of block b. Always filled, padding
  // included (zeros).
  const float* half_scales() const { return half_scales_.get(); }

  // Derived forms for the kernels that take many vectors at once, filled by
  // quantize() for the whole padded length (REQUIRES has_derived_forms()):
  // q() regrouped as the q4 kernels pair values with weight nibbles: in each
  // group of 4 blocks (128 bytes from block 4g on), the first 16 values of
  // blocks 0, 1, 2, 3, then their last 16.
  const int8_t* q_regrouped() const { return q_regrouped_.get(); }
  // q_lo() regrouped the same way; null with one term.
  const int8_t* q_lo_regrouped() const { return terms_ == 2 ? q_lo_regrouped_.get() : nullptr; }
  // One int32 per 4 values: -128 * (q[4i] + ... + q[4i + 3]), the correction
  // a product with unsigned weight bytes (w + 128) needs; k / 4 entries plus
  // padding, 64-byte aligned.
  const int32_t* q_bias() const { return q_bias_.get(); }
  // The same for q_lo(); null with one term.
  const int32_t* q_lo_bias() const { return terms_ == 2 ? q_lo_bias_.get() : nullptr; }

 private:
  struct AlignedFree {
    void operator()(void* p) const;
  };
  int64_t k_ = 0;
  int terms_ = 1;
  bool derived_forms_ = false;
  int64_t capacity_blocks_ = 0;
  std::unique_ptr<int8_t[], AlignedFree> q_;
  std::unique_ptr<int8_t[], AlignedFree> q_lo_;
  std::unique_ptr<float[], AlignedFree> scales_;
  std::unique_ptr<float[], AlignedFree> half_scales_;
  std::unique_ptr<int8_t[], AlignedFree> q_regrouped_;
  std::unique_ptr<int8_t[], AlignedFree> q_lo_regrouped_;
  std::unique_ptr<int32_t[], AlignedFree> q_bias_;
  std::unique_ptr<int32_t[], AlignedFree> q_lo_bias_;
};

// The formats of qgemv_kquant.cc, which both multiplies them (gemv) and
// expands them to f32 (the backend's GEMM panels): q5_0, q5_1, iq4_nl and
// q2_k..q6_k.
inline bool kquant_kernel_type(DType t) {
  switch (t) {
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kIQ4_NL:
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
      return true;
    default:
      return false;
  }
}

// The block types gemv multiplies against int8 activations (Q8Activations):
// q4_0, q4_1 and q8_0 (hand-written kernels per path), q5_0, q5_1, iq4_nl and
// the K-quants q2_k to q6_k (qgemv_kquant.cc: portable code with AVX2 forms,
// built per path).
inline bool qgemv_block_type(DType t) {
  return t == DType::kQ4_0 || t == DType::kQ4_1 || t == DType::kQ8_0 || kquant_kernel_type(t);
}

// y[r] = Σ_c W[r, c] * x[c] for every r in [row_begin, row_end), where W is a
// row-major matrix of `wtype` with k columns: row r starts at
// w + r * dtype_row_bytes(wtype, k). y is indexed by absolute row, so threads
// that split the rows pass the same w and y.
//   block types: read xq (REQUIRES xq.k() == k, k a multiple of the type's
//                block: 32, or 256 for the K-quants); x unused.
//   f32, f16:         read x[0..k) directly with f32 FMA (any k ≥ 1); xq unused.
// REQUIRES: path ≤ hardware_cpu_path(), 0 ≤ row_begin ≤ row_end ≤ rows of W.
// Throws duet::Error(kInternal) for any other wtype, a k or xq that breaks
// these requirements, or a path this CPU cannot run (caller bugs; the path is
// checked because the alternative is SIGILL).
// Reads nothing outside the rows [row_begin, row_end) (it may prefetch past
// them, which never faults).
void gemv(CpuPath path, DType wtype, const void* w, int64_t k, const Q8Activations& xq,
          const float* x, float* y, int64_t row_begin, int64_t row_end);

// The product for n activation vectors at once (a short prefill, a speculative
// verification): y[i * ldy + r] = Σ_c W[r, c] * x_i[c] for i in [0, n) and r
// in [row_begin, row_end), where x_i is xq[i] for quantized weights and
// x + i * k for f32/f16 (the other may be null). Each weight row is read from
// memory once for all n vectors, so n vectors cost about as much memory
// traffic as one; on the AVX-512 paths the quantized kernels also unpack each
// weight block once for up to 8 vectors. Every y is bit-identical to gemv's
// for the same vector, whatever n and whichever vectors share the call. Same
// requirements and errors as gemv; n ≥ 1, ldy ≥ rows.
void gemv_batch(CpuPath path, DType wtype, const void* w, int64_t k, const Q8Activations* xq,
                const float* x, int64_t n, float* y, int64_t ldy, int64_t row_begin,
                int64_t row_end);

}  // namespace duet::onednn
