// AmxBf16Rows and row_tiles_product_amx_bf16's checks. Built for baseline
// x86-64: the AMX and AVX-512 instructions live in
// row_tiles_amx_bf16_kernel.cc alone.
#include "kernels/row_tiles_amx_bf16.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include "duet/byte_size.h"
#include "duet/error.h"
#include "kernels/cpu_features.h"
#include "kernels/qgemv_paths.h"

namespace duet::onednn {

void AmxBf16Rows::reset(int64_t n, int64_t k) {
  const int64_t bytes = (n + kRows - 1) / kRows * (k / RowTiles::kBlock) * kBlockBytes;
  if (bytes > capacity_) {  // first: a throw leaves the object as it was
    void* p = std::aligned_alloc(64, static_cast<size_t>(bytes));
    if (p == nullptr) {
      throw Error(ErrorKind::kOutOfMemory,
                  "onednn: cannot allocate " + format_bytes(static_cast<uint64_t>(bytes)) +
                      " for activation rows in AMX tile order; set backend.options.amx: off");
    }
    data_.reset(static_cast<uint8_t*>(p));
    capacity_ = bytes;
  }
  n_ = n;
  k_ = k;
  const int64_t first = n % kRows;  // of the last group's rows, the first past n
  if (first == 0) return;
  for (int64_t b = 0; b < blocks(); ++b) {
    uint8_t* blk = mutable_block(groups() - 1, b);
    for (int64_t part = 0; part < 2; ++part) {
      std::memset(blk + part * kTileBytes + first * 64, 0,
                  static_cast<size_t>((kRows - first) * 64));
    }
  }
}

void AmxBf16Rows::pack_row(const float* x, int64_t row) {
  detail::pack_row_amx_bf16(x, blocks(), mutable_block(row / kRows, 0), row % kRows);
}

void row_tiles_product_amx_bf16(const RowTiles& tiles, const AmxBf16Rows& act, float* y,
                                int64_t ldy, int64_t tile_begin, int64_t tile_end) {
  if (!amx_bf16_usable()) {
    throw Error(ErrorKind::kInternal,
                "row tiles: the AMX-BF16 kernel needs AMX-BF16, AVX-512 BF16 and VBMI, which "
                "this CPU or OS does not offer (cpu features: " +
                    cpu_features_summary() + ")");
  }
  if (act.k() != tiles.k()) {
    throw Error(ErrorKind::kInternal, "row tiles: AMX-BF16 activation rows of " +
                                          std::to_string(act.k()) +
                                          " values against k = " + std::to_string(tiles.k()));
  }
  if (act.rows() == 0 || tile_begin >= tile_end) return;
  detail::row_tiles_amx_bf16(tiles, act, y, ldy, tile_begin, tile_end);
}

}  // namespace duet::onednn
