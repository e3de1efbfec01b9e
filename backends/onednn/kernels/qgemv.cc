// Validation and dispatch for qgemv.h; the arithmetic lives in qgemv_<path>.cc.
#include "kernels/qgemv.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "duet/block_formats.h"
#include "duet/error.h"
#include "kernels/qgemv_paths.h"

namespace duet::onednn {
namespace {

constexpr int64_t kBlock = duet::blocks::kQK;

void check_path(CpuPath path, const char* what) {
  // Cached: hardware_cpu_path() is a static, but this runs once per product.
  static const CpuPath hw = hardware_cpu_path();
  if (path > hw) {
    throw Error(ErrorKind::kInternal, std::string(what) + ": CPU path " + cpu_path_name(path) +
                                          " is beyond this CPU's " + cpu_path_name(hw));
  }
}

template <class T>
T* aligned_array(int64_t count) {
  // 64 bytes: one cache line, and the alignment of a ZMM load.
  const auto bytes = static_cast<size_t>(count) * sizeof(T);
  void* p = std::aligned_alloc(64, bytes);
  if (p == nullptr) throw std::bad_alloc();
  return static_cast<T*>(p);
}

// Round to nearest, ties to even, then clamp to ±127. Adding 1.5 * 2^23
// leaves no fraction bits, so the float adder rounds (as vcvtps2dq does).
// REQUIRES: |v| < 2^22 (NaN and inf are kept out by the caller). Plain
// arithmetic and an integer clamp, unlike lrint or a float clamp (which GCC
// leaves as branches for its NaN rule), so the loop below vectorises.
int32_t round_even_127(float v) {
  return std::clamp(static_cast<int32_t>((v + 0x1.8p23f) - 0x1.8p23f), -127, 127);
}

// The second term of qgemv.h's two-term quantization, from the first (q,
// scales as quantize_<path> left them): fills q_lo and turns each block's
// (d, d*Σq) into (d/256, d/256 * Σ(256*q + q_lo)). Portable code, the
// definition the AVX-512 paths' quantize_terms_avx512 matches bit for
// bit.
void quantize_second_term(const float* x, int64_t k, const int8_t* q, int8_t* q_lo, float* scales) {
  for (int64_t b = 0; b < k / kBlock; ++b) {
    const float* xb = x + b * kBlock;
    const int8_t* qb = q + b * kBlock;
    int8_t* lob = q_lo + b * kBlock;
    const float d = scales[2 * b];
    float id = d != 0.0f ? 256.0f / d : 0.0f;
    // x·0 is NaN for an inf or NaN x: such a block (or one below ~1e-34,
    // whose id overflows) gets no second term.
    float poison = 0.0f;
    for (int64_t i = 0; i < kBlock; ++i) poison += xb[i] * 0.0f;
    if (!std::isfinite(id) || poison != 0.0f) id = 0.0f;
    int32_t sum = 0;
    for (int64_t i = 0; i < kBlock; ++i) {
      // |x - d*q| ≤ d/2 (plus rounding), so the value is within ±129.
      const int32_t v = round_even_127((xb[i] - d * static_cast<float>(qb[i])) * id);
      lob[i] = static_cast<int8_t>(v);
      sum += 256 * qb[i] + v;
    }
    const float unit = d * (1.0f / 256.0f);  // exact: a power-of-two scaling
    scales[2 * b] = unit;
    scales[2 * b + 1] = unit * static_cast<float>(sum);
  }
}

// half_scales[2b + h] = unit * Σ of half h's values (Q8Activations::half_scales),
// from the stored terms: q, or 256 * q + q_lo with two.
void fill_half_scales(const int8_t* q, const int8_t* q_lo, int64_t blocks, const float* scales,
                      float* half_scales) {
  constexpr int64_t kHalf = kBlock / 2;
  for (int64_t h = 0; h < 2 * blocks; ++h) {
    int32_t sum = 0;
    for (int64_t i = h * kHalf; i < (h + 1) * kHalf; ++i) {
      sum += q_lo != nullptr ? 256 * q[i] + q_lo[i] : q[i];
    }
    half_scales[h] = scales[2 * (h / 2)] * static_cast<float>(sum);
  }
}

// Q8Activations' derived forms (qgemv.h) of one term's values over the
// padded length: the q4 grouping and the unsigned-product correction.
void derive_forms(const int8_t* q, int64_t padded_blocks, int8_t* regrouped, int32_t* bias) {
  constexpr int64_t kHalf = kBlock / 2;
  for (int64_t g = 0; g < padded_blocks / 4; ++g) {
    const int8_t* src = q + g * 4 * kBlock;
    int8_t* dst = regrouped + g * 4 * kBlock;
    for (int64_t j = 0; j < 4; ++j) {
      std::memcpy(dst + j * kHalf, src + j * kBlock, kHalf);
      std::memcpy(dst + 4 * kHalf + j * kHalf, src + j * kBlock + kHalf, kHalf);
    }
  }
  for (int64_t i = 0; i < padded_blocks * kBlock / 4; ++i) {
    bias[i] = -128 * (q[4 * i] + q[4 * i + 1] + q[4 * i + 2] + q[4 * i + 3]);
  }
}

detail::GemvArgs make_args(CpuPath path, DType wtype, const void* w, int64_t k,
                           const Q8Activations* xq, const float* x, float* y, int64_t row_begin,
                           int64_t row_end) {
  check_path(path, "gemv");
  const bool quantized = qgemv_block_type(wtype);
  if (!quantized && wtype != DType::kF32 && wtype != DType::kF16) {
    throw Error(ErrorKind::kInternal,
                "gemv: weight type " + std::string(dtype_name(wtype)) + " has no CPU kernel");
  }
  const auto row_bytes = dtype_row_bytes(wtype, static_cast<uint64_t>(k));
  if (k <= 0 || !row_bytes || (quantized && xq->k() != k) || row_begin < 0 || row_end < row_begin) {
    throw Error(ErrorKind::kInternal, "gemv: bad shape for " + std::string(dtype_name(wtype)) +
                                          " weights, k = " + std::to_string(k));
  }
  return {wtype,
          static_cast<const uint8_t*>(w),
          static_cast<int64_t>(*row_bytes),
          k,
          xq,
          x,
          y,
          row_begin,
          row_end};
}

// a.n vectors through the path's many-vector kernel; false where it has none.
bool run_many(CpuPath path, const detail::GemvArgs& a) {
  if (kquant_kernel_type(a.wtype)) return false;
  switch (path) {
    case CpuPath::kAvx512:
      return detail::gemv_many_avx512(a);
    case CpuPath::kAvx512Vnni:
      return detail::gemv_many_avx512_vnni(a);
    default:
      return false;
  }
}

void run_kquant(CpuPath path, const detail::GemvArgs& a) {
  switch (path) {
    case CpuPath::kScalar:
      detail::gemv_kquant_scalar(a);
      return;
    case CpuPath::kAvx2:
      detail::gemv_kquant_avx2(a);
      return;
    case CpuPath::kAvx512:
      detail::gemv_kquant_avx512(a);
      return;
    case CpuPath::kAvx512Vnni:
      detail::gemv_kquant_avx512_vnni(a);
      return;
  }
}

void run(CpuPath path, const detail::GemvArgs& a) {
  if (kquant_kernel_type(a.wtype)) {
    run_kquant(path, a);
    return;
  }
  switch (path) {
    case CpuPath::kScalar:
      detail::gemv_scalar(a);
      return;
    case CpuPath::kAvx2:
      detail::gemv_avx2(a);
      return;
    case CpuPath::kAvx512:
      detail::gemv_avx512(a);
      return;
    case CpuPath::kAvx512Vnni:
      detail::gemv_avx512_vnni(a);
      return;
  }
}

}  // namespace

void Q8Activations::AlignedFree::operator()(void* p) const { std::free(p); }

void Q8Activations::quantize(const float* x, int64_t k, CpuPath path, int terms,
                             bool derived_forms) {
  check_path(path, "Q8Activations::quantize");
  if (k <= 0 || k % kBlock != 0 || (terms != 1 && terms != 2)) {
    throw Error(ErrorKind::kInternal, "Q8Activations: k = " + std::to_string(k) +
                                          ", terms = " + std::to_string(terms) +
                                          ": need a positive multiple of 32 and 1 or 2 terms");
  }
  const int64_t blocks = k / kBlock;
  const int64_t padded = (blocks + kPadBlocks - 1) / kPadBlocks * kPadBlocks;
  if (padded > capacity_blocks_) {
    q_.reset(aligned_array<int8_t>(padded * kBlock));
    q_lo_.reset(aligned_array<int8_t>(padded * kBlock));
    scales_.reset(aligned_array<float>(padded * 2));
    half_scales_.reset(aligned_array<float>(padded * 2));
    q_regrouped_.reset(aligned_array<int8_t>(padded * kBlock));
    q_lo_regrouped_.reset(aligned_array<int8_t>(padded * kBlock));
    q_bias_.reset(aligned_array<int32_t>(padded * kBlock / 4));
    q_lo_bias_.reset(aligned_array<int32_t>(padded * kBlock / 4));
    capacity_blocks_ = padded;
  }
  k_ = k;
  terms_ = terms;
  // The padding blocks read as zeros: they add 0 to every sum.
  std::memset(q_.get() + k, 0, static_cast<size_t>((padded - blocks) * kBlock));
  std::memset(q_lo_.get() + k, 0, static_cast<size_t>((padded - blocks) * kBlock));
  std::fill(scales_.get() + 2 * blocks, scales_.get() + 2 * padded, 0.0f);
  switch (path) {
    case CpuPath::kScalar:
      detail::quantize_scalar(x, k, q_.get(), scales_.get());
      break;
    case CpuPath::kAvx2:
      detail::quantize_avx2(x, k, q_.get(), scales_.get());
      break;
    case CpuPath::kAvx512:
    case CpuPath::kAvx512Vnni:
      detail::quantize_terms_avx512(x, k, terms, q_.get(), q_lo_.get(), scales_.get(),
                                    half_scales_.get());
      break;
  }
  if (path < CpuPath::kAvx512) {
    if (terms == 2) quantize_second_term(x, k, q_.get(), q_lo_.get(), scales_.get());
    fill_half_scales(q_.get(), terms == 2 ? q_lo_.get() : nullptr, blocks, scales_.get(),
                     half_scales_.get());
  }
  std::fill(half_scales_.get() + 2 * blocks, half_scales_.get() + 2 * padded, 0.0f);
  derived_forms_ = derived_forms;
  if (!derived_forms) return;
  derive_forms(q_.get(), padded, q_regrouped_.get(), q_bias_.get());
  if (terms == 2) derive_forms(q_lo_.get(), padded, q_lo_regrouped_.get(), q_lo_bias_.get());
}

void gemv(CpuPath path, DType wtype, const void* w, int64_t k, const Q8Activations& xq,
          const float* x, float* y, int64_t row_begin, int64_t row_end) {
  run(path, make_args(path, wtype, w, k, &xq, x, y, row_begin, row_end));
}

void gemv_batch(CpuPath path, DType wtype, const void* w, int64_t k, const Q8Activations* xq,
                const float* x, int64_t n, float* y, int64_t ldy, int64_t row_begin,
                int64_t row_end) {
  if (n < 1) throw Error(ErrorKind::kInternal, "gemv_batch: n = " + std::to_string(n));
  detail::GemvArgs a = make_args(path, wtype, w, k, xq, x, y, row_begin, row_end);
  for (int64_t i = 0; i < n; ++i) {
    if (qgemv_block_type(wtype) && i > 0 && xq[i].k() != k) {
      throw Error(ErrorKind::kInternal, "gemv_batch: activation vectors differ in length");
    }
    if (qgemv_block_type(wtype) && n > 1 && !xq[i].has_derived_forms()) {
      throw Error(ErrorKind::kInternal, "gemv_batch: activation vector " + std::to_string(i) +
                                            " was quantized without its derived forms");
    }
  }
  // Tiles of rows small enough to stay in L1 (≤ 16 KiB) while all n vectors
  // pass over them: memory traffic is that of one product, the arithmetic n
  // products' (which decode-sized matrices leave idle anyway). A multiple of
  // 4 rows, the kernels' widest pass.
  const int64_t tile = std::max<int64_t>(4, 16384 / a.row_bytes / 4 * 4);
  a.n = n;
  a.ldy = ldy;
  for (int64_t r0 = row_begin; r0 < row_end; r0 += tile) {
    a.row_begin = r0;
    a.row_end = std::min(row_end, r0 + tile);
    if (n > 1 && run_many(path, a)) continue;
    detail::GemvArgs one = a;
    for (int64_t i = 0; i < n; ++i) {
      if (qgemv_block_type(wtype)) {
        one.xq = xq + i;
      } else {
        one.x = x + i * k;
      }
      one.y = y + i * ldy;
      run(path, one);
    }
  }
}

}  // namespace duet::onednn
