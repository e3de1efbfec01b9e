#include "onednn_ops.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

namespace duet::onednn {
namespace {

// Elementwise ops on fewer floats than this run on the calling thread: the
// work would not pay for waking the pool.
constexpr int64_t kParallelElements = int64_t{1} << 16;
// The gated activations take an exponential per element, ~0.4 ns on the
// Xeon of 2026-12-05: from here on halving them pays for the pool's wake-up
// (a 16-sequence decode step's 16 x 1536 ran ~10 us a layer on one thread).
constexpr int64_t kParallelGatedElements = int64_t{1} << 13;

// The weight types the embedding and matmul read: every block format with a
// gemv kernel and row tiles (kernels/qgemv.h, kernels/row_tiles.h) and an
// expansion to f32 for GEMM panels (expand_weights), the float types with
// f32 arithmetic.
constexpr DType kWeightTypes[] = {DType::kF32,  DType::kF16,   DType::kBF16, DType::kQ4_0,
                                  DType::kQ4_1, DType::kQ5_0,  DType::kQ5_1, DType::kQ8_0,
                                  DType::kQ2_K, DType::kQ3_K,  DType::kQ4_K, DType::kQ5_K,
                                  DType::kQ6_K, DType::kIQ4_NL};

}  // namespace

OnednnOps::OnednnOps(std::shared_ptr<ThreadPool> pool, CpuPath path, const BackendOptions& options,
                     std::shared_ptr<RowTilesCache> tiles)
    : pool_(pool),
      kernels_(vector_kernels(path)),
      batch_invariant_(options.batch_invariant),
      matmul_(std::move(pool), path, options, std::move(tiles)) {}

Support OnednnOps::supports(const OpDesc& desc) const {
  return weight_op_support("onednn", desc, kWeightTypes);
}

void OnednnOps::embedding(const TensorView& table, const TensorView& ids, TensorView out) {
  const int64_t n = ids.shape[0];
  const int64_t dim = table.shape[1];
  const uint64_t row_bytes = *dtype_row_bytes(table.dtype, static_cast<uint64_t>(dim));
  const auto* base = static_cast<const uint8_t*>(table.data);
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* row = base + static_cast<uint64_t>(ids.as<const int32_t>()[i]) * row_bytes;
    expand_weights(kernels_, table.dtype, row, out.as<float>() + i * dim, dim);
  }
}

void OnednnOps::matmul(const TensorView& x, const TensorView& w, TensorView out) {
  matmul_.run(x, w, out);
}

void OnednnOps::matmuls(const TensorView& x, std::span<const TensorView> w,
                        std::span<const TensorView> out) {
  matmul_.run_shared(x, w, out);
}

template <typename Fn>
void OnednnOps::for_rows(int64_t rows, int64_t row_elements, const Fn& fn) {
  if (rows * row_elements < kParallelElements) {
    fn(int64_t{0}, rows);
    return;
  }
  pool_->parallel_for(rows, 1, [&](int64_t begin, int64_t end, int) { fn(begin, end); });
}

void OnednnOps::rmsnorm(const TensorView& x, const TensorView& weight, float eps, TensorView out) {
  const int64_t n = x.shape[0];
  const int64_t d = x.shape[1];
  const float* w = weight.as<const float>();
  for_rows(n, d, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float* xi = x.as<const float>() + i * d;
      float* oi = out.as<float>() + i * d;  // may be xi: every x is read before it is written
      // Eight independent partial sums vectorize without reassociating.
      constexpr int64_t kLanes = 8;
      double lanes[kLanes] = {};
      int64_t c = 0;
      for (; c + kLanes <= d; c += kLanes) {
        for (int64_t j = 0; j < kLanes; ++j) lanes[j] += double{xi[c + j]} * xi[c + j];
      }
      double sum_sq = 0.0;
      for (; c < d; ++c) sum_sq += double{xi[c]} * xi[c];
      for (double l : lanes) sum_sq += l;
      const auto scale = static_cast<float>(1.0 / std::sqrt(sum_sq / static_cast<double>(d) + eps));
      for (c = 0; c < d; ++c) oi[c] = xi[c] * scale * w[c];
    }
  });
}

const std::vector<float>& OnednnOps::rope_table(float theta_base, int64_t head_dim,
                                                const float* freq_factors, int32_t max_position) {
  const int64_t half = head_dim / 2;
  std::vector<float> factors(static_cast<size_t>(half), 1.0f);
  if (freq_factors != nullptr) factors.assign(freq_factors, freq_factors + half);
  auto it = std::find_if(rope_tables_.begin(), rope_tables_.end(), [&](const RopeTable& t) {
    return t.theta_base == theta_base && t.head_dim == head_dim && t.factors == factors;
  });
  if (it == rope_tables_.end()) {
    // Models use one or two bases (Gemma 3: local and global layers); a
    // caller cycling through more only rebuilds.
    if (rope_tables_.size() == kRopeTables) rope_tables_.erase(rope_tables_.begin());
    rope_tables_.push_back(RopeTable{theta_base, head_dim, factors, 0, {}});
    it = rope_tables_.end() - 1;
  }
  RopeTable& t = *it;
  if (max_position < t.positions) return t.values;
  // Grow to the next power of two, so a long decode rebuilds rarely.
  int64_t positions = std::max<int64_t>(64, t.positions);
  while (positions <= max_position) positions *= 2;
  t.values.resize(static_cast<size_t>(positions * half * 2));
  for (int64_t p = t.positions; p < positions; ++p) {
    for (int64_t j = 0; j < half; ++j) {
      const double angle = static_cast<double>(p) *
                           std::pow(static_cast<double>(theta_base),
                                    -2.0 * static_cast<double>(j) / static_cast<double>(head_dim)) /
                           double{t.factors[static_cast<size_t>(j)]};
      t.values[static_cast<size_t>((p * half + j) * 2)] = static_cast<float>(std::cos(angle));
      t.values[static_cast<size_t>((p * half + j) * 2 + 1)] = static_cast<float>(std::sin(angle));
    }
  }
  t.positions = positions;
  return t.values;
}

void OnednnOps::rope(TensorView x, const TensorView& positions, const RopeParams& params) {
  const int64_t n = x.shape[0];
  const int64_t heads = x.shape[1];
  const int64_t head_dim = x.shape[2];
  const int64_t half = head_dim / 2;
  const int32_t* pos = positions.as<const int32_t>();
  int32_t max_position = 0;
  for (int64_t i = 0; i < n; ++i) max_position = std::max(max_position, pos[i]);
  const std::vector<float>& table = rope_table(
      params.theta_base, head_dim,
      params.freq_factors.data ? params.freq_factors.as<const float>() : nullptr, max_position);
  const bool adjacent = params.pairs == RopeParams::Pairs::kAdjacent;
  for_rows(n, heads * head_dim, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float* cs = table.data() + static_cast<int64_t>(pos[i]) * half * 2;
      for (int64_t h = 0; h < heads; ++h) {
        kernels_.rope(x.as<float>() + (i * heads + h) * head_dim, cs, half, adjacent);
      }
    }
  });
}

void OnednnOps::gated(GatedKernel kernel, const TensorView& gate, const TensorView& up,
                      TensorView out) {
  const int64_t n = gate.elements();
  const float* g = gate.as<const float>();
  const float* u = up.as<const float>();
  float* o = out.as<float>();
  if (batch_invariant_) {
    // Row by row: the kernel's scalar tail (a different exp) then covers
    // the same columns of every row, whatever the number of rows.
    const int64_t cols = gate.shape.innermost();
    for_rows(gate.shape.rows(), cols, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) kernel(g + i * cols, u + i * cols, o + i * cols, cols);
    });
    return;
  }
  if (n < kParallelGatedElements) {
    kernel(g, u, o, n);
    return;
  }
  pool_->parallel_for(n, 1024, [&](int64_t begin, int64_t end, int) {
    kernel(g + begin, u + begin, o + begin, end - begin);
  });
}

void OnednnOps::swiglu(const TensorView& gate, const TensorView& up, TensorView out) {
  gated(kernels_.swiglu, gate, up, out);
}

void OnednnOps::add(const TensorView& a, const TensorView& b, TensorView out) {
  const int64_t n = a.elements();
  const float* pa = a.as<const float>();
  const float* pb = b.as<const float>();
  float* po = out.as<float>();
  for_rows(n, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) po[i] = pa[i] + pb[i];
  });
}

void OnednnOps::add_bias(const TensorView& x, const TensorView& bias, TensorView out) {
  const int64_t cols = x.shape[1];
  const float* px = x.as<const float>();
  const float* pb = bias.as<const float>();
  float* po = out.as<float>();
  for_rows(x.shape[0], cols, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      for (int64_t c = 0; c < cols; ++c) po[r * cols + c] = px[r * cols + c] + pb[c];
    }
  });
}

void OnednnOps::geglu(const TensorView& gate, const TensorView& up, TensorView out) {
  gated(kernels_.geglu, gate, up, out);
}

void OnednnOps::scale(const TensorView& x, float factor, TensorView out) {
  const float* px = x.as<const float>();
  float* po = out.as<float>();
  for_rows(x.elements(), 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) po[i] = px[i] * factor;
  });
}

}  // namespace duet::onednn
