// kernels/amx_tiles.h — what the AMX kernels (row_tiles_amx_kernel.cc,
// row_tiles_amx_bf16_kernel.cc) share: the tile configuration's layout,
// configuring a thread's tiles for a scope, and a scratch buffer per thread.
//
// Internal to those kernels: every function has internal linkage, so each
// file keeps its own copy (and its own scratch buffer), built with its own
// flags.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>

#include "kernels/avx512_intrinsics.h"

namespace duet::onednn::detail {
namespace {  // NOLINT(google-build-namespaces): see above

// ldtilecfg's 64-byte operand (palette 1): each tile's rows and bytes per row.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// The calling thread's tiles configured by `config` while this lives, and
// released however the scope ends.
class ConfiguredTiles {
 public:
  explicit ConfiguredTiles(const TileConfig& config) { _tile_loadconfig(&config); }
  ~ConfiguredTiles() { _tile_release(); }
  ConfiguredTiles(const ConfiguredTiles&) = delete;
  ConfiguredTiles& operator=(const ConfiguredTiles&) = delete;
};

// The calling thread's scratch buffer of at least `bytes`, 64-byte aligned;
// kept and grown as asked. Throws std::bad_alloc.
uint8_t* thread_scratch(int64_t bytes) {
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  thread_local std::unique_ptr<uint8_t, Free> buffer;
  thread_local int64_t capacity = 0;
  if (bytes > capacity) {
    auto* p = static_cast<uint8_t*>(std::aligned_alloc(64, static_cast<size_t>(bytes)));
    if (p == nullptr) throw std::bad_alloc();
    buffer.reset(p);
    capacity = bytes;
  }
  // The analyzer takes the thread_local buffer for one freed by reset().
  return buffer.get();  // NOLINT(clang-analyzer-unix.Malloc)
}

}  // namespace
}  // namespace duet::onednn::detail
