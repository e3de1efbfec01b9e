#include "kv_allocator.h"

#include <algorithm>
#include <cassert>
#include <functional>

namespace duet {

KVAllocator::KVAllocator(int64_t capacity_tokens, int32_t block_tokens)
    : capacity_(capacity_tokens), block_tokens_(block_tokens) {
  assert(block_tokens > 0 && capacity_tokens % block_tokens == 0);
  const auto n_blocks = static_cast<int32_t>(capacity_tokens / block_tokens);
  for (int32_t b = n_blocks - 1; b >= 0; --b) free_blocks_.push_back(b);
}

int32_t KVAllocator::length(int32_t seq) const {
  auto it = sequences_.find(seq);
  return it == sequences_.end() ? 0 : it->second.length;
}

int64_t KVAllocator::room(int32_t seq) const {
  int64_t tail = 0;
  if (auto it = sequences_.find(seq); it != sequences_.end()) {
    tail = static_cast<int64_t>(it->second.blocks.size()) * block_tokens_ - it->second.length;
  }
  return tail + static_cast<int64_t>(free_blocks_.size()) * block_tokens_;
}

bool KVAllocator::append(int32_t seq, int32_t n) {
  if (n < 0 || room(seq) < n) return false;
  Sequence& s = sequences_[seq];
  s.length += n;
  while (static_cast<int64_t>(s.blocks.size()) * block_tokens_ < s.length) {
    s.blocks.push_back(free_blocks_.back());
    free_blocks_.pop_back();
  }
  return true;
}

int32_t KVAllocator::slot(int32_t seq, int32_t pos) const {
  const Sequence& s = sequences_.at(seq);
  assert(pos >= 0 && pos < s.length);
  return s.blocks[static_cast<size_t>(pos / block_tokens_)] * block_tokens_ + pos % block_tokens_;
}

const std::vector<int32_t>& KVAllocator::block_table(int32_t seq) const {
  static const std::vector<int32_t> kEmpty;
  auto it = sequences_.find(seq);
  return it == sequences_.end() ? kEmpty : it->second.blocks;
}

void KVAllocator::give_back(std::vector<int32_t>::const_iterator begin,
                            std::vector<int32_t>::const_iterator end) {
  // Return blocks so that the lowest index is handed out next.
  free_blocks_.insert(free_blocks_.end(), begin, end);
  std::sort(free_blocks_.begin(), free_blocks_.end(), std::greater<>());
}

void KVAllocator::truncate(int32_t seq, int32_t n) {
  assert(n >= 0);
  auto it = sequences_.find(seq);
  if (it == sequences_.end() || it->second.length <= n) return;
  Sequence& s = it->second;
  s.length = n;
  const auto keep = static_cast<size_t>((n + block_tokens_ - 1) / block_tokens_);
  give_back(s.blocks.begin() + static_cast<std::ptrdiff_t>(keep), s.blocks.end());
  s.blocks.resize(keep);
}

void KVAllocator::release(int32_t seq) {
  auto it = sequences_.find(seq);
  if (it == sequences_.end()) return;
  give_back(it->second.blocks.begin(), it->second.blocks.end());
  sequences_.erase(it);
}

}  // namespace duet
