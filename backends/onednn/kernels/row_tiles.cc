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

// f32 scale arrays (16 each) before a block's bytes: d and m per half
// (kHalves), or d alone (kBytes: q8_0, m = -128d).
int scale_count(TileFormat format) { return format == TileFormat::kHalves ? 4 : 1; }

// One 32-element block of one row in tile form: x[e] = d[h] * u[e] + m[h]
// with h = e / 16 (equal halves for formats with one scale per 32).
struct TileBlock {
  uint8_t u[RowTiles::kBlock];
  float d[2];
  float m[2];
};

// Block b (in 32-element units) of the row at `row`, of q8_0 or of the
// half-block formats: element e of a q8_0 block; of a K-quant super-block,
// element 32 s + e.
TileBlock tile_block(DType type, const uint8_t* row, int64_t b) {
  TileBlock t{};
  auto fill = [&](auto quant) {
    for (int e = 0; e < RowTiles::kBlock; ++e) t.u[e] = static_cast<uint8_t>(quant(e));
  };
  auto scale = [&](float d, float m) {  // one scale and offset for the whole block
    t.d[0] = t.d[1] = d;
    t.m[0] = t.m[1] = m;
  };
  constexpr int kSubs = blk::kQK_K / RowTiles::kBlock;  // 32-element blocks per super-block
  const int s = static_cast<int>(b % kSubs);
  switch (type) {
    case DType::kQ8_0: {
      const auto& x = reinterpret_cast<const blk::BlockQ8_0*>(row)[b];
      fill([&](int e) { return x.qs[e] + 128; });
      scale(f16_to_f32(x.d), -128.0f * f16_to_f32(x.d));
      break;
    }
    // Sub-blocks of 16: the 32-element block s holds sub-blocks 2s and 2s + 1.
    case DType::kQ2_K: {
      const auto& x = reinterpret_cast<const blk::BlockQ2_K*>(row)[b / kSubs];
      fill([&](int e) { return blk::q2_k_quant(x, 32 * s + e); });
      for (int h = 0; h < 2; ++h) {
        t.d[h] = f16_to_f32(x.d) * static_cast<float>(blk::q2_k_scale(x, 2 * s + h));
        t.m[h] = -(f16_to_f32(x.dmin) * static_cast<float>(blk::q2_k_min(x, 2 * s + h)));
      }
      break;
    }
    case DType::kQ3_K: {
      const auto& x = reinterpret_cast<const blk::BlockQ3_K*>(row)[b / kSubs];
      fill([&](int e) { return blk::q3_k_quant(x, 32 * s + e) + 4; });
      for (int h = 0; h < 2; ++h) {
        t.d[h] = f16_to_f32(x.d) * static_cast<float>(blk::q3_k_scale(x, 2 * s + h) - 32);
        t.m[h] = -4.0f * t.d[h];
      }
      break;
    }
    default:
      throw Error(ErrorKind::kInternal,
                  "row tiles: no packing for dtype " + std::string(dtype_name(type)));
  }
  return t;
}

// Row r's part of block b of a kBytes or kHalves tile at `out` (src null: a
// zero row).
void pack_bytes(DType type, TileFormat format, const uint8_t* src, int64_t b, int r, uint8_t* out) {
  const TileBlock tb = src != nullptr ? tile_block(type, src, b) : TileBlock{};
  auto* scales = reinterpret_cast<float*>(out);
  if (format == TileFormat::kBytes) {
    scales[r] = tb.d[0];
  } else {
    for (int h = 0; h < 2; ++h) {
      scales[h * RowTiles::kRows + r] = tb.d[h];
      scales[(2 + h) * RowTiles::kRows + r] = tb.m[h];
    }
  }
  uint8_t* u = out + scale_count(format) * RowTiles::kRows * sizeof(float);
  for (int j = 0; j < RowTiles::kBlock / 4; ++j) std::memcpy(u + 64 * j + 4 * r, tb.u + 4 * j, 4);
}

// The same for a kNibbles or kFiveBits tile: the block's f16 fields and
// nibbles as stored (q4_0, iq4_nl and q5_0: m unused, 0), and q5_0's and
// q5_1's fifth bits regrouped (row_tiles.h).
void pack_nibbles(DType type, const uint8_t* src, int64_t b, int r, uint8_t* out) {
  constexpr int kRows = RowTiles::kRows;
  auto* half = reinterpret_cast<uint16_t*>(out);
  uint8_t* q = out + 2 * kRows * sizeof(uint16_t);
  uint16_t d = 0, m = 0;
  const uint8_t* qs = nullptr;
  uint32_t qh = 0;
  // Block b of the row as the block type B: its d and nibbles (and m and
  // fifth bits, if any).
  auto take = [&]<class B>(const B* blocks) {
    d = blocks[b].d;
    qs = blocks[b].qs;
    if constexpr (requires { blocks[b].m; }) m = blocks[b].m;
    if constexpr (requires { blocks[b].qh; }) std::memcpy(&qh, blocks[b].qh, sizeof qh);
  };
  if (src != nullptr) {
    switch (type) {
      case DType::kQ4_0:
        take(reinterpret_cast<const blk::BlockQ4_0*>(src));
        break;
      case DType::kIQ4_NL:
        take(reinterpret_cast<const blk::BlockIQ4_NL*>(src));
        break;
      case DType::kQ5_0:
        take(reinterpret_cast<const blk::BlockQ5_0*>(src));
        break;
      case DType::kQ5_1:
        take(reinterpret_cast<const blk::BlockQ5_1*>(src));
        break;
      default:
        take(reinterpret_cast<const blk::BlockQ4_1*>(src));
    }
  }
  half[r] = d;
  half[kRows + r] = m;
  for (int j = 0; j < RowTiles::kBlock / 8; ++j) {
    if (qs != nullptr) {
      std::memcpy(q + 64 * j + 4 * r, qs + 4 * j, 4);
    } else {
      std::memset(q + 64 * j + 4 * r, 0, 4);
    }
  }
  if (tile_format(type) != TileFormat::kFiveBits) return;
  uint8_t* high = q + RowTiles::kBlock / 2 * kRows;
  for (int i = 0; i < 4; ++i) {
    uint8_t bits = 0;
    for (int j = 0; j < 8; ++j) bits |= static_cast<uint8_t>(((qh >> (4 * j + i)) & 1u) << j);
    high[4 * r + i] = bits;
  }
}

// Row r's part of block b of a kSixBits tile at `out` (src null: a zero
// row): q6_k's super-block d, the block's two int8 scales, and its q
// (0..63) split into the nibble vectors and the planes of high bits
// (row_tiles.h).
void pack_six_bits(const uint8_t* src, int64_t b, int r, uint8_t* out) {
  constexpr int kRows = RowTiles::kRows;
  constexpr int64_t kSubs = blk::kQK_K / RowTiles::kBlock;  // blocks per super-block
  auto* half = reinterpret_cast<uint16_t*>(out);
  auto* scales = reinterpret_cast<int8_t*>(out + kRows * 2);
  uint8_t* q = out + 2 * kRows * 2;
  uint8_t* high = q + RowTiles::kBlock / 2 * kRows;
  int u[RowTiles::kBlock] = {};
  half[r] = 0;
  scales[r] = scales[kRows + r] = 0;
  if (src != nullptr) {
    const auto& x = reinterpret_cast<const blk::BlockQ6_K*>(src)[b / kSubs];
    const int64_t s = b % kSubs;
    half[r] = x.d;
    scales[r] = x.scales[2 * s];
    scales[kRows + r] = x.scales[2 * s + 1];
    for (int e = 0; e < RowTiles::kBlock; ++e) {
      u[e] = blk::q6_k_quant(x, static_cast<int>(RowTiles::kBlock * s) + e) + 32;
    }
  }
  for (int j = 0; j < 4; ++j) {
    for (int i = 0; i < 4; ++i) {
      q[64 * j + 4 * r + i] =
          static_cast<uint8_t>((u[4 * j + i] & 15) | (u[16 + 4 * j + i] & 15) << 4);
    }
  }
  for (int v = 0; v < 2; ++v) {
    for (int i = 0; i < 4; ++i) {
      uint8_t bits = 0;
      for (int j = 0; j < 4; ++j)
        bits |= static_cast<uint8_t>((u[16 * v + 4 * j + i] >> 4) << (2 * j));
      high[64 * v + 4 * r + i] = bits;
    }
  }
}

// Row r's part of super-block sb of a kSuperNibbles (B = BlockQ4_K) or
// kSuperFiveBits (BlockQ5_K) tile at `out` (src null: a zero row): the
// block's fields, its scales and minimums unpacked to bytes, and q5_k's
// fifth bits regrouped (row_tiles.h).
template <class B>
void pack_super_nibbles(const uint8_t* src, int64_t sb, int r, uint8_t* out) {
  constexpr int kRows = RowTiles::kRows;
  auto* half = reinterpret_cast<uint16_t*>(out);
  uint8_t* scales = out + RowTiles::kSuperScalesAt;
  uint8_t* mins = out + RowTiles::kSuperMinsAt;
  uint8_t* q = out + RowTiles::kSuperHeaderBytes;
  const B* x = src != nullptr ? &reinterpret_cast<const B*>(src)[sb] : nullptr;
  half[r] = x != nullptr ? x->d : 0;
  half[kRows + r] = x != nullptr ? x->dmin : 0;
  for (int s = 0; s < RowTiles::kSubBlocks; ++s) {
    int sc = 0, mn = 0;
    if (x != nullptr) blk::k4_scale_min(x->scales, s, sc, mn);
    scales[s * kRows + r] = static_cast<uint8_t>(sc);
    mins[s * kRows + r] = static_cast<uint8_t>(mn);
  }
  constexpr int kGroupBytes = RowTiles::kBlock * kRows;  // two sub-blocks' nibbles
  for (int p = 0; p < RowTiles::kSubBlocks / 2; ++p) {
    for (int j = 0; j < RowTiles::kBlock / 4; ++j) {
      uint8_t* to = q + p * kGroupBytes + 64 * j + 4 * r;
      if (x != nullptr) {
        std::memcpy(to, x->qs + RowTiles::kBlock * p + 4 * j, 4);
      } else {
        std::memset(to, 0, 4);
      }
    }
  }
  if constexpr (requires { x->qh; }) {
    // Element e of block s has its fifth bit at bit s of qh[e].
    uint8_t* high = out + RowTiles::kSuperBytes;
    for (int s = 0; s < RowTiles::kSubBlocks; ++s) {
      for (int i = 0; i < 4; ++i) {
        uint8_t bits = 0;
        for (int j = 0; j < 8 && x != nullptr; ++j) {
          bits |= static_cast<uint8_t>(((x->qh[4 * j + i] >> s) & 1u) << j);
        }
        high[64 * s + 4 * r + i] = bits;
      }
    }
  }
}

}  // namespace

bool row_tiles_type(DType t) {
  switch (t) {
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kQ8_0:
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

bool row_tiles_path(CpuPath path) { return path == CpuPath::kAvx2 || path == CpuPath::kAvx512Vnni; }

bool row_tiles_kernel(CpuPath path, DType t) {
  if (!row_tiles_type(t)) return false;
  if (path == CpuPath::kAvx512Vnni) return true;
  // iq4_nl's levels (+128: up to 241) would saturate vpmaddubsw's sums;
  // q8_0's bytes are taken back to signed ones (row_tiles_avx2.cc).
  const TileFormat f = tile_format(t);
  return row_tiles_path(path) && ((nibble_tiles(t) && t != DType::kIQ4_NL) ||
                                  f == TileFormat::kFiveBits || f == TileFormat::kBytes);
}

bool row_tiles_from_one_row(CpuPath path, DType t) {
  if (!row_tiles_kernel(path, t)) return false;
  // VNNI: every format whose tiles are about the file's size, i.e. all
  // but the half-block tiles (row_tiles.h).
  if (path == CpuPath::kAvx512Vnni) return tile_format(t) != TileFormat::kHalves;
  return tile_format(t) == TileFormat::kNibbles || tile_format(t) == TileFormat::kFiveBits;
}

bool nibble_tiles(DType t) {
  return tile_format(t) == TileFormat::kNibbles || tile_format(t) == TileFormat::kSuperNibbles;
}

TileFormat tile_format(DType t) {
  if (t == DType::kQ4_0 || t == DType::kQ4_1 || t == DType::kIQ4_NL) return TileFormat::kNibbles;
  if (t == DType::kQ5_0 || t == DType::kQ5_1) return TileFormat::kFiveBits;
  if (t == DType::kQ4_K) return TileFormat::kSuperNibbles;
  if (t == DType::kQ5_K) return TileFormat::kSuperFiveBits;
  if (t == DType::kQ2_K || t == DType::kQ3_K) return TileFormat::kHalves;
  if (t == DType::kQ6_K) return TileFormat::kSixBits;
  return TileFormat::kBytes;
}

void RowTiles::AlignedFree::operator()(uint8_t* p) const { std::free(p); }

RowTiles::RowTiles(DType type, int64_t rows, int64_t k)
    : type_(type),
      format_(row_tiles_type(type) ? tile_format(type) : TileFormat::kBytes),
      rows_(rows),
      k_(k),
      tiles_((rows + kRows - 1) / kRows) {
  if (!row_tiles_type(type) || rows < 1 || k < 1 ||
      k % static_cast<int64_t>(dtype_traits(type).block_size) != 0) {
    throw Error(ErrorKind::kInternal, "row tiles: no tiles for a [" + std::to_string(rows) + ", " +
                                          std::to_string(k) + "] matrix of " +
                                          std::string(dtype_name(type)));
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

int64_t RowTiles::block_bytes() const {
  switch (format_) {
    case TileFormat::kNibbles:
      return 2 * kRows * 2 + kBlock / 2 * kRows;
    case TileFormat::kFiveBits:
      return 2 * kRows * 2 + kBlock / 2 * kRows + kBlock / 8 * kRows;
    case TileFormat::kSixBits:
      return kRows * 2 + 2 * kRows + kBlock / 2 * kRows + kBlock / 4 * kRows;
    case TileFormat::kSuperNibbles:
      return kSuperBytes / kSubBlocks;
    case TileFormat::kSuperFiveBits:
      return kSuperFiveBytes / kSubBlocks;
    default:
      return scale_count(format_) * kRows * int64_t{sizeof(float)} + kBlock * kRows;
  }
}

void RowTiles::pack(const void* w, int64_t tile_begin, int64_t tile_end) {
  const uint64_t row_bytes = *dtype_row_bytes(type_, static_cast<uint64_t>(k_));
  const auto* rows = static_cast<const uint8_t*>(w);
  for (int64_t t = tile_begin; t < tile_end; ++t) {
    uint8_t* out = data_.get() + t * blocks() * block_bytes();
    if (super_blocks(format_)) {
      const bool five = format_ == TileFormat::kSuperFiveBits;
      for (int64_t sb = 0; sb < blocks() / kSubBlocks; ++sb, out += kSubBlocks * block_bytes()) {
        for (int r = 0; r < kRows; ++r) {
          const int64_t row = t * kRows + r;
          const uint8_t* src = row < rows_ ? rows + row * row_bytes : nullptr;
          if (five) {
            pack_super_nibbles<blk::BlockQ5_K>(src, sb, r, out);
          } else {
            pack_super_nibbles<blk::BlockQ4_K>(src, sb, r, out);
          }
        }
      }
      continue;
    }
    for (int64_t b = 0; b < blocks(); ++b, out += block_bytes()) {
      for (int r = 0; r < kRows; ++r) {
        const int64_t row = t * kRows + r;
        const uint8_t* src = row < rows_ ? rows + row * row_bytes : nullptr;
        if (format_ == TileFormat::kNibbles || format_ == TileFormat::kFiveBits) {
          pack_nibbles(type_, src, b, r, out);
        } else if (format_ == TileFormat::kSixBits) {
          pack_six_bits(src, b, r, out);
        } else {
          pack_bytes(type_, format_, src, b, r, out);
        }
      }
    }
  }
}

void row_tiles_product(CpuPath path, const RowTiles& tiles, const Q8Activations* xq, int64_t n,
                       float* y, int64_t ldy, int64_t tile_begin, int64_t tile_end) {
  if (!row_tiles_kernel(path, tiles.type()) || path > hardware_cpu_path()) {
    throw Error(ErrorKind::kInternal,
                "row tiles: no kernel for " + std::string(dtype_name(tiles.type())) +
                    " tiles on CPU path " + cpu_path_name(path) + " on this CPU");
  }
  for (int64_t i = 0; i < n; ++i) {
    if (xq[i].k() != tiles.k()) {
      throw Error(ErrorKind::kInternal, "row tiles: activation row of " +
                                            std::to_string(xq[i].k()) +
                                            " values against k = " + std::to_string(tiles.k()));
    }
  }
  const bool vnni = path == CpuPath::kAvx512Vnni;
  const int64_t max_vectors =
      vnni ? detail::kRowTilesMaxVectorsVnni : detail::kRowTilesMaxVectorsAvx2;
  // Runs of rows with one number of terms, in passes of at most max_vectors
  // whose sizes differ by at most one (17 = 9 + 8: a pass of one row more
  // costs far less than a pass of its own); each pass over all the tiles, so
  // that its activations stay in L1 while the tiles (a few per call, see
  // Matmul) come from L2.
  for (int64_t v = 0; v < n;) {
    const int terms = xq[v].terms();
    int64_t end = v + 1;
    while (end < n && xq[end].terms() == terms) ++end;
    const int64_t count = end - v;
    const int64_t passes = (count + max_vectors - 1) / max_vectors;
    for (int64_t pass = 0; pass < passes; ++pass) {
      const int64_t nv = count / passes + (pass < count % passes ? 1 : 0);
      if (vnni) {
        detail::row_tiles_avx512_vnni(tiles, xq + v, nv, terms, y + v * ldy, ldy, tile_begin,
                                      tile_end);
      } else {
        detail::row_tiles_avx2(tiles, xq + v, nv, terms, y + v * ldy, ldy, tile_begin, tile_end);
      }
      v += nv;
    }
  }
}

}  // namespace duet::onednn
