// AmxActivations and row_tiles_product_amx's checks. Built for baseline
// x86-64: the AMX instructions live in row_tiles_amx_kernel.cc alone.
#include "kernels/row_tiles_amx.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "duet/byte_size.h"
#include "duet/error.h"
#include "kernels/qgemv_paths.h"

namespace duet::onednn {

void AmxActivations::AlignedFree::operator()(int8_t* p) const { std::free(p); }

void AmxActivations::reset(int64_t n, int64_t k, int terms) {
  const int64_t bytes = (n + kRows - 1) / kRows * (k / RowTiles::kBlock) * block_bytes(terms);
  if (bytes > capacity_) grow(bytes);  // first: a throw leaves the object as it was
  n_ = n;
  k_ = k;
  terms_ = terms;
}

void AmxActivations::grow(int64_t bytes) {
  void* p = std::aligned_alloc(64, static_cast<size_t>(bytes));
  if (p == nullptr) {
    throw Error(ErrorKind::kOutOfMemory,
                "onednn: cannot allocate " + format_bytes(static_cast<uint64_t>(bytes)) +
                    " for activation rows in AMX tile order; set backend.options.amx: off");
  }
  data_.reset(static_cast<int8_t*>(p));
  capacity_ = bytes;
}

AmxActivations::Parts AmxActivations::parts(int64_t g, int64_t b) {
  int8_t* tiles = data_.get() + (g * blocks() + b) * block_bytes();
  auto* scales = reinterpret_cast<float*>(tiles + terms_ * kTileBytes);
  return Parts{tiles, scales, scales + 2 * kRows};
}

void AmxActivations::pack(const Q8Activations* xq) {
  clear_padding();
  for (int64_t row = 0; row < n_; ++row) pack_row(xq[row], row);
}

void AmxActivations::pack_row(const Q8Activations& x, int64_t row) {
  constexpr int64_t kBlock = RowTiles::kBlock;
  const int64_t i = row % kRows;
  for (int64_t b = 0; b < blocks(); ++b) {
    const Parts p = parts(row / kRows, b);
    std::memcpy(p.tiles + i * kBlock, x.q() + b * kBlock, kBlock);
    if (terms_ == 2) std::memcpy(p.tiles + kTileBytes + i * kBlock, x.q_lo() + b * kBlock, kBlock);
    p.scales[2 * i] = x.scales()[2 * b];
    p.scales[2 * i + 1] = x.scales()[2 * b + 1];
    p.half_sums[2 * i] = x.half_scales()[2 * b];
    p.half_sums[2 * i + 1] = x.half_scales()[2 * b + 1];
  }
}

void AmxActivations::clear_padding() {
  constexpr int64_t kBlock = RowTiles::kBlock;
  const int64_t first = n_ % kRows;
  if (n_ == 0 || first == 0) return;
  for (int64_t b = 0; b < blocks(); ++b) {
    const Parts p = parts(groups() - 1, b);
    for (int t = 0; t < terms_; ++t) {
      std::memset(p.tiles + t * kTileBytes + first * kBlock, 0,
                  static_cast<size_t>((kRows - first) * kBlock));
    }
    std::fill(p.scales + 2 * first, p.scales + 2 * kRows, 0.0f);
    std::fill(p.half_sums + 2 * first, p.half_sums + 2 * kRows, 0.0f);
  }
}

void row_tiles_product_amx(const RowTiles& tiles, const AmxActivations& act, float* y, int64_t ldy,
                           int64_t tile_begin, int64_t tile_end) {
  if (!amx_int8_usable() || hardware_cpu_path() != CpuPath::kAvx512Vnni) {
    throw Error(ErrorKind::kInternal,
                "row tiles: the AMX-INT8 kernel needs AMX and AVX-512 VNNI, which this CPU or "
                "OS does not offer (cpu features: " +
                    cpu_features_summary() + ")");
  }
  if (act.k() != tiles.k()) {
    throw Error(ErrorKind::kInternal, "row tiles: AMX activation rows of " +
                                          std::to_string(act.k()) +
                                          " values against k = " + std::to_string(tiles.k()));
  }
  if (act.rows() == 0 || tile_begin >= tile_end) return;
  detail::row_tiles_amx(tiles, act, y, ldy, tile_begin, tile_end);
}

}  // namespace duet::onednn
