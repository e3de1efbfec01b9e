// row_tiles_cache.h — the row tiles (kernels/row_tiles.h) of the weight
// matrices a backend has multiplied, kept while their memory holds them.
//
// Weights arrive in matmul as plain views of device memory, so the cache
// keys each matrix by its address, dtype and shape, and the backend's device
// (onednn_device.h) tells it when memory is freed or written, which drops
// the tiles made from it: a matrix loaded later at the same address is never
// mistaken for the old one. Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>

#include "duet/tensor.h"
#include "kernels/row_tiles.h"

namespace duet::onednn {

class RowTilesCache {
 public:
  using Pack = std::function<void(RowTiles& tiles, const TensorView& w)>;

  // The tiles of the [rows, k] matrix w (REQUIRES row_tiles_type(w.dtype)),
  // made by `pack` on first use. The pointer stays valid after a forget().
  std::shared_ptr<const RowTiles> get(const TensorView& w, const Pack& pack);

  // Drops the tiles of every matrix that starts in [begin, begin + bytes).
  void forget(const void* begin, uint64_t bytes);

  // Bytes held by the tiles now.
  int64_t bytes() const;

 private:
  struct Entry {
    DType dtype;
    int64_t rows;
    int64_t k;
    std::shared_ptr<const RowTiles> tiles;
  };
  mutable std::mutex mutex_;
  std::map<uintptr_t, Entry> entries_;  // by the matrix's address
};

}  // namespace duet::onednn
