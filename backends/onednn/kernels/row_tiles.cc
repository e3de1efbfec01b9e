// Packing and dispatch for row_tiles.h; the kernel lives in row_tiles_vnni.cc.
#include "kernels/row_tiles.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include "duet/block_formats.h"
#include "duet/byte_size.h"
#include "duet/error.h"
#include "duet/quant.h"
#include "kernels/qgemv_paths.h"

namespace duet::onednn {
namespace {

namespace blk = duet::blocks;

// One 32-element block of one row in tile form: x[e] = d * u[e] + m.
struct TileBlock {
  uint8_t u[RowTiles::kBlock];
  float d;
  float m;
};

// Block b (in 32-element units) of the row at `row`, whose blocks are of
// type B. Element e of a 32-block of the 32-element formats is nibble(qs, e)
// (and the fifth bit); of a K-quant super-block, element 32 s + e.
TileBlock tile_block(DType type, const uint8_t* row, int64_t b) {
  TileBlock t{};
  auto fill = [&](auto quant) {
    for (int e = 0; e < RowTiles::kBlock; ++e) t.u[e] = static_cast<uint8_t>(quant(e));
  };
  switch (type) {
    case DType::kQ4_0: {
      const auto& x = reinterpret_cast<const blk::BlockQ4_0*>(row)[b];
      fill([&](int e) { return blk::nibble(x.qs, e); });
      t.d = f16_to_f32(x.d);
      t.m = -8.0f * t.d;
      break;
    }
    case DType::kQ4_1: {
      const auto& x = reinterpret_cast<const blk::BlockQ4_1*>(row)[b];
      fill([&](int e) { return blk::nibble(x.qs, e); });
      t.d = f16_to_f32(x.d);
      t.m = f16_to_f32(x.m);
      break;
    }
    case DType::kQ5_0: {
      const auto& x = reinterpret_cast<const blk::BlockQ5_0*>(row)[b];
      fill([&](int e) { return blk::q5_0_quant(x, e) + 16; });
      t.d = f16_to_f32(x.d);
      t.m = -16.0f * t.d;
      break;
    }
    case DType::kQ5_1: {
      const auto& x = reinterpret_cast<const blk::BlockQ5_1*>(row)[b];
      fill([&](int e) { return blk::q5_1_quant(x, e); });
      t.d = f16_to_f32(x.d);
      t.m = f16_to_f32(x.m);
      break;
    }
    case DType::kQ8_0: {
      const auto& x = reinterpret_cast<const blk::BlockQ8_0*>(row)[b];
      fill([&](int e) { return x.qs[e] + 128; });
      t.d = f16_to_f32(x.d);
      t.m = -128.0f * t.d;
      break;
    }
    case DType::kQ4_K:
    case DType::kQ5_K: {
      constexpr int kSubs = blk::kQK_K / RowTiles::kBlock;
      const int s = static_cast<int>(b % kSubs);
      int sc = 0, mn = 0;
      if (type == DType::kQ4_K) {
        const auto& x = reinterpret_cast<const blk::BlockQ4_K*>(row)[b / kSubs];
        fill([&](int e) { return blk::q4_k_quant(x, 32 * s + e); });
        blk::k4_scale_min(x.scales, s, sc, mn);
        t.d = f16_to_f32(x.d) * static_cast<float>(sc);
        t.m = -(f16_to_f32(x.dmin) * static_cast<float>(mn));
      } else {
        const auto& x = reinterpret_cast<const blk::BlockQ5_K*>(row)[b / kSubs];
        fill([&](int e) { return blk::q5_k_quant(x, 32 * s + e); });
        blk::k4_scale_min(x.scales, s, sc, mn);
        t.d = f16_to_f32(x.d) * static_cast<float>(sc);
        t.m = -(f16_to_f32(x.dmin) * static_cast<float>(mn));
      }
      break;
    }
    default:
      throw Error(ErrorKind::kInternal,
                  "row tiles: no packing for dtype " + std::string(dtype_name(type)));
  }
  return t;
}

}  // namespace

bool row_tiles_type(DType t) {
  switch (t) {
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kQ8_0:
    case DType::kQ4_K:
    case DType::kQ5_K:
      return true;
    default:
      return false;
  }
}

bool row_tiles_path(CpuPath path) { return path == CpuPath::kAvx512Vnni; }

void RowTiles::AlignedFree::operator()(uint8_t* p) const { std::free(p); }

RowTiles::RowTiles(int64_t rows, int64_t k)
    : rows_(rows), k_(k), tiles_((rows + kRows - 1) / kRows) {
  if (rows < 1 || k < kBlock || k % kBlock != 0) {
    throw Error(ErrorKind::kInternal, "row tiles: bad shape [" + std::to_string(rows) + ", " +
                                          std::to_string(k) + "]");
  }
  void* p = std::aligned_alloc(64, static_cast<size_t>(bytes()));
  if (p == nullptr) {
    throw Error(ErrorKind::kOutOfMemory,
                "onednn: cannot allocate " + format_bytes(static_cast<uint64_t>(bytes())) +
                    " for the row tiles of a [" + std::to_string(rows) + ", " + std::to_string(k) +
                    "] weight matrix; set backend.options.row_tiles_min_rows: 0 to multiply "
                    "the weights in place");
  }
  data_.reset(static_cast<uint8_t*>(p));
}

void RowTiles::pack(DType type, const void* w, int64_t tile_begin, int64_t tile_end) {
  const uint64_t row_bytes = *dtype_row_bytes(type, static_cast<uint64_t>(k_));
  for (int64_t t = tile_begin; t < tile_end; ++t) {
    uint8_t* out = data_.get() + t * blocks() * kBlockBytes;
    for (int64_t b = 0; b < blocks(); ++b, out += kBlockBytes) {
      auto* d = reinterpret_cast<float*>(out);
      auto* m = d + kRows;
      uint8_t* u = out + 2 * kRows * sizeof(float);
      for (int r = 0; r < kRows; ++r) {
        const int64_t row = t * kRows + r;
        TileBlock tb{};
        if (row < rows_) {
          tb = tile_block(type, static_cast<const uint8_t*>(w) + row * row_bytes, b);
        }
        d[r] = tb.d;
        m[r] = tb.m;
        // Vector j holds elements 4j..4j+3 of every row, row r at 4r.
        for (int j = 0; j < kBlock / 4; ++j) std::memcpy(u + 64 * j + 4 * r, tb.u + 4 * j, 4);
      }
    }
  }
}

void row_tiles_product(CpuPath path, const RowTiles& tiles, const Q8Activations* xq, int64_t n,
                       float* y, int64_t ldy, int64_t tile_begin, int64_t tile_end) {
  if (!row_tiles_path(path) || path > hardware_cpu_path()) {
    throw Error(ErrorKind::kInternal, std::string("row tiles: no kernel for CPU path ") +
                                          cpu_path_name(path) + " on this CPU");
  }
  for (int64_t i = 0; i < n; ++i) {
    if (xq[i].k() != tiles.k()) {
      throw Error(ErrorKind::kInternal, "row tiles: activation row of " +
                                            std::to_string(xq[i].k()) + " values against k = " +
                                            std::to_string(tiles.k()));
    }
  }
  detail::row_tiles_avx512_vnni(tiles, xq, n, y, ldy, tile_begin, tile_end);
}

}  // namespace duet::onednn
