#include "row_tiles_cache.h"

namespace duet::onednn {

std::shared_ptr<const RowTiles> RowTilesCache::get(const TensorView& w, const Pack& pack) {
  const auto key = reinterpret_cast<uintptr_t>(w.data);
  const int64_t rows = w.shape[0];
  const int64_t k = w.shape[1];
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(key);
  if (it != entries_.end() && it->second.dtype == w.dtype && it->second.rows == rows &&
      it->second.k == k) {
    return it->second.tiles;
  }
  auto tiles = std::make_shared<RowTiles>(w.dtype, rows, k);
  pack(*tiles, w);
  Entry entry{w.dtype, rows, k, std::move(tiles)};
  if (it != entries_.end()) {
    it->second = std::move(entry);
  } else {
    it = entries_.emplace(key, std::move(entry)).first;
  }
  return it->second.tiles;
}

void RowTilesCache::forget(const void* begin, uint64_t bytes) {
  const auto first = reinterpret_cast<uintptr_t>(begin);
  std::lock_guard<std::mutex> lock(mutex_);
  if (entries_.empty()) return;
  auto it = entries_.lower_bound(first);
  // A zero-byte range still covers a matrix that starts exactly at begin.
  while (it != entries_.end() && (it->first == first || it->first - first < bytes)) {
    it = entries_.erase(it);
  }
}

int64_t RowTilesCache::bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  int64_t total = 0;
  for (const auto& [key, entry] : entries_) total += entry.tiles->bytes();
  return total;
}

}  // namespace duet::onednn
