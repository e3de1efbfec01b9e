#include "kv/kv_allocator.h"

#include <algorithm>
#include <functional>
#include <limits>

#include "duet/error.h"

namespace duet {

namespace {

[[noreturn]] void misuse(const std::string& what) {
  throw Error(ErrorKind::kInternal, "KVAllocator: " + what);
}

}  // namespace

KVAllocator::KVAllocator(int64_t capacity_tokens, int32_t block_tokens,
                         std::optional<WindowRingGeometry> rings)
    : capacity_(capacity_tokens),
      block_tokens_(block_tokens),
      rings_(rings ? std::make_unique<WindowRings>(*rings) : nullptr) {
  // Slots are int32_t, so the capacity must fit one.
  if (block_tokens <= 0 || capacity_tokens < 0 ||
      capacity_tokens > std::numeric_limits<int32_t>::max() ||
      capacity_tokens % block_tokens != 0) {
    misuse("block_tokens " + std::to_string(block_tokens) +
           " must be positive and divide capacity_tokens " + std::to_string(capacity_tokens) +
           " (at most 2^31 - 1)");
  }
  const auto n_blocks = static_cast<int32_t>(capacity_tokens / block_tokens);
  blocks_.resize(static_cast<size_t>(n_blocks));
  // Ascending order is already a min-heap.
  free_.resize(static_cast<size_t>(n_blocks));
  for (int32_t b = 0; b < n_blocks; ++b) free_[static_cast<size_t>(b)] = b;
}

KVAllocator::~KVAllocator() = default;

int32_t KVAllocator::max_step_rows() const {
  return rings_ ? rings_->max_step_rows() : std::numeric_limits<int32_t>::max();
}

std::string KVAllocator::ring_room_hint() const {
  if (!rings_) return "";
  return "; the sliding-window layers' rings (" + std::to_string(rings_->free_blocks()) + " of " +
         std::to_string(rings_->total_blocks()) +
         " blocks free) hold batching.max_sequences sequences: raise it, or set "
         "components.kv_cache.window_layers: full";
}

int64_t KVAllocator::total_blocks() const { return static_cast<int64_t>(blocks_.size()); }

int64_t KVAllocator::free_blocks() const {
  return static_cast<int64_t>(free_.size() + lru_.size());
}

int64_t KVAllocator::cached_blocks() const { return static_cast<int64_t>(lru_.size()); }

int64_t KVAllocator::used_blocks() const { return total_blocks() - free_blocks(); }

int32_t KVAllocator::length(int32_t seq) const {
  auto it = sequences_.find(seq);
  return it == sequences_.end() ? 0 : it->second.length;
}

bool KVAllocator::needs_copy(const Sequence& s) const {
  if (s.length % block_tokens_ == 0) return false;  // new positions start a new block
  // Only attach_prefix shares a block, and only a published one.
  return blocks_[static_cast<size_t>(s.blocks.back())].published;
}

int64_t KVAllocator::room(int32_t seq) const {
  const int64_t ring_room =
      rings_ ? rings_->room(seq, length(seq)) : std::numeric_limits<int64_t>::max();
  auto it = sequences_.find(seq);
  if (it == sequences_.end()) return std::min(ring_room, free_blocks() * block_tokens_);
  const Sequence& s = it->second;
  const int64_t tail = static_cast<int64_t>(s.blocks.size()) * block_tokens_ - s.length;
  int64_t blocks = free_blocks();
  if (needs_copy(s)) {
    if (blocks == 0) return 0;
    // The copy takes a block; the old one comes back as cached if `seq`
    // alone held it (it is published, or it would need no copy).
    blocks -= blocks_[static_cast<size_t>(s.blocks.back())].refs > 1 ? 1 : 0;
  }
  return std::min(ring_room, tail + blocks * block_tokens_);
}

int32_t KVAllocator::take() {
  int32_t b = 0;
  if (!free_.empty()) {
    std::pop_heap(free_.begin(), free_.end(), std::greater<>());
    b = free_.back();
    free_.pop_back();
  } else {
    // The front has no cached blocks keyed on it (see the header), so
    // unpublishing it alone leaves no key naming it.
    b = lru_.front();
    unpublish_cached(b);
  }
  blocks_[static_cast<size_t>(b)].refs = 1;
  return b;
}

void KVAllocator::drop(int32_t b) {
  Block& block = blocks_[static_cast<size_t>(b)];
  if (--block.refs > 0) return;
  if (block.published) {
    block.lru = lru_.insert(lru_.end(), b);
  } else {
    free_.push_back(b);
    std::push_heap(free_.begin(), free_.end(), std::greater<>());
  }
}

void KVAllocator::unpublish_cached(int32_t b) {
  Block& block = blocks_[static_cast<size_t>(b)];
  published_.erase(block.key);
  block.published = false;
  lru_.erase(block.lru);
}

bool KVAllocator::append(int32_t seq, int32_t n, std::vector<BlockCopy>& copies) {
  if (n < 0)
    misuse("append of " + std::to_string(n) + " positions to sequence " + std::to_string(seq));
  if (n == 0) return true;
  if (room(seq) < n) return false;
  Sequence& s = sequences_[seq];
  if (needs_copy(s)) {
    // Take before dropping, so that the old block is never its own copy.
    const int32_t copy = take();
    const int32_t old = s.blocks.back();
    copies.push_back(BlockCopy{old, copy});
    s.blocks.back() = copy;
    s.published = std::min(s.published, s.blocks.size() - 1);
    drop(old);
  }
  s.length += n;
  while (static_cast<int64_t>(s.blocks.size()) * block_tokens_ < s.length)
    s.blocks.push_back(take());
  // room() counted the ring's blocks too.
  if (rings_) rings_->grow(seq, s.length);
  return true;
}

bool KVAllocator::append(int32_t seq, int32_t n) {
  if (auto it = sequences_.find(seq); n > 0 && it != sequences_.end() && needs_copy(it->second)) {
    misuse("sequence " + std::to_string(seq) +
           " shares its last block, so an append must report a copy; use the overload with copies");
  }
  std::vector<BlockCopy> none;
  return append(seq, n, none);
}

int32_t KVAllocator::slot(int32_t seq, int32_t pos) const {
  const int32_t held = length(seq);
  if (pos < 0 || pos >= held) {
    misuse("slot of position " + std::to_string(pos) + " of sequence " + std::to_string(seq) +
           ", which holds " + std::to_string(held));
  }
  const Sequence& s = sequences_.find(seq)->second;
  return s.blocks[static_cast<size_t>(pos / block_tokens_)] * block_tokens_ + pos % block_tokens_;
}

const std::vector<int32_t>& KVAllocator::block_table(int32_t seq) const {
  static const std::vector<int32_t> kEmpty;
  auto it = sequences_.find(seq);
  return it == sequences_.end() ? kEmpty : it->second.blocks;
}

void KVAllocator::truncate(int32_t seq, int32_t n) {
  if (n < 0)
    misuse("truncate of sequence " + std::to_string(seq) + " to " + std::to_string(n) +
           " positions");
  if (n == 0) return release(seq);
  auto it = sequences_.find(seq);
  if (it == sequences_.end() || it->second.length <= n) return;
  Sequence& s = it->second;
  if (rings_ && s.length - n >= rings_->max_step_rows()) {
    misuse("truncate of sequence " + std::to_string(seq) + " from " + std::to_string(s.length) +
           " to " + std::to_string(n) + " positions: its window rings keep only the last " +
           std::to_string(rings_->max_step_rows() - 1) + " positions a step may roll back");
  }
  s.length = n;
  const auto keep = static_cast<size_t>((n + block_tokens_ - 1) / block_tokens_);
  // Last block first: see the eviction order in the header.
  while (s.blocks.size() > keep) {
    drop(s.blocks.back());
    s.blocks.pop_back();
  }
  s.published = std::min(s.published, keep);
}

void KVAllocator::release(int32_t seq) {
  auto it = sequences_.find(seq);
  if (it == sequences_.end()) return;
  const std::vector<int32_t>& blocks = it->second.blocks;
  for (auto b = blocks.rbegin(); b != blocks.rend(); ++b) drop(*b);
  sequences_.erase(it);
  if (rings_) rings_->release(seq);
}

int32_t KVAllocator::attach_prefix(int32_t seq, std::span<const int32_t> tokens,
                                   int32_t max_positions) {
  if (length(seq) != 0) {
    misuse("attach_prefix to sequence " + std::to_string(seq) + ", which already holds " +
           std::to_string(length(seq)) + " positions");
  }
  if (max_positions < 0)
    misuse("attach_prefix with max_positions " + std::to_string(max_positions));
  if (rings_) return 0;  // nothing is published
  const auto bt = static_cast<size_t>(block_tokens_);
  std::vector<int32_t> matched;
  Key key{-1, {}};
  for (size_t i = 0; (i + 1) * bt <= tokens.size() && i * bt < static_cast<size_t>(max_positions);
       ++i) {
    key.second.assign(tokens.begin() + static_cast<std::ptrdiff_t>(i * bt),
                      tokens.begin() + static_cast<std::ptrdiff_t>((i + 1) * bt));
    auto found = published_.find(key);
    if (found == published_.end()) break;
    matched.push_back(found->second);
    key.first = found->second;
  }
  if (matched.empty()) return 0;
  for (int32_t b : matched) {
    Block& block = blocks_[static_cast<size_t>(b)];
    if (block.refs++ == 0) lru_.erase(block.lru);
  }
  Sequence& s = sequences_[seq];
  s.length = static_cast<int32_t>(
      std::min<int64_t>(static_cast<int64_t>(matched.size() * bt), max_positions));
  s.published = matched.size();
  s.blocks = std::move(matched);
  return s.length;
}

void KVAllocator::publish(int32_t seq, std::span<const int32_t> tokens) {
  auto it = sequences_.find(seq);
  if (it == sequences_.end() || rings_) return;
  Sequence& s = it->second;
  if (tokens.size() < static_cast<size_t>(s.length)) {
    misuse("publish of sequence " + std::to_string(seq) + " with " + std::to_string(tokens.size()) +
           " tokens for its " + std::to_string(s.length) + " positions");
  }
  const auto bt = static_cast<size_t>(block_tokens_);
  const size_t full = static_cast<size_t>(s.length) / bt;
  for (; s.published < full; ++s.published) {
    const size_t i = s.published;
    const int32_t b = s.blocks[i];
    Key key{i == 0 ? -1 : s.blocks[i - 1],
            std::vector<int32_t>(tokens.begin() + static_cast<std::ptrdiff_t>(i * bt),
                                 tokens.begin() + static_cast<std::ptrdiff_t>((i + 1) * bt))};
    auto [where, inserted] = published_.try_emplace(std::move(key), b);
    // Another block holds these tokens here: this one and the rest stay private.
    if (!inserted) return;
    blocks_[static_cast<size_t>(b)].published = true;
    blocks_[static_cast<size_t>(b)].key = where;
  }
}

void KVAllocator::clear_cache() {
  while (!lru_.empty()) {
    const int32_t b = lru_.front();
    unpublish_cached(b);
    free_.push_back(b);
    std::push_heap(free_.begin(), free_.end(), std::greater<>());
  }
}

std::string KVAllocator::check() const {
  if (rings_) {
    if (std::string broken = rings_->check(); !broken.empty()) return "window rings: " + broken;
    for (const auto& [id, s] : sequences_) {
      if (!rings_->covers(id, s.length))
        return "sequence " + std::to_string(id) + " holds " + std::to_string(s.length) +
               " positions but its ring does not reach them";
    }
  }
  const size_t total = blocks_.size();
  const auto name = [](int32_t b) { return "block " + std::to_string(b); };
  // Table entries naming each block, and the last sequence (counted from 1)
  // that named it.
  std::vector<int32_t> named(total, 0);
  std::vector<size_t> named_by(total, 0);
  size_t stamp = 0;
  for (const auto& [id, s] : sequences_) {
    ++stamp;
    const std::string seq = "sequence " + std::to_string(id);
    const auto want =
        static_cast<size_t>((static_cast<int64_t>(s.length) + block_tokens_ - 1) / block_tokens_);
    if (s.length < 0 || s.blocks.size() != want) {
      return seq + " holds " + std::to_string(s.blocks.size()) + " blocks for " +
             std::to_string(s.length) + " positions";
    }
    if (s.published > s.blocks.size()) return seq + " counts more published blocks than it holds";
    for (size_t i = 0; i < s.blocks.size(); ++i) {
      const int32_t b = s.blocks[i];
      if (b < 0 || static_cast<size_t>(b) >= total)
        return seq + " names " + name(b) + ", out of range";
      const auto u = static_cast<size_t>(b);
      if (named_by[u] == stamp) return seq + " names " + name(b) + " twice";
      ++named[u];
      named_by[u] = stamp;
      const Block& block = blocks_[u];
      if (block.published != (i < s.published)) {
        return seq + ": " + name(b) + " at index " + std::to_string(i) + " is " +
               (block.published ? "" : "not ") + "published, but " + std::to_string(s.published) +
               " leading blocks are";
      }
      const int32_t before = i == 0 ? -1 : s.blocks[i - 1];
      if (block.published && block.key->first.first != before) {
        return seq + ": published " + name(b) + " is keyed on " +
               std::to_string(block.key->first.first) + ", not on the block before it, " +
               std::to_string(before);
      }
    }
  }
  std::vector<char> in_free(total, 0);
  for (int32_t b : free_) {
    if (b < 0 || static_cast<size_t>(b) >= total) return "free " + name(b) + " is out of range";
    if (in_free[static_cast<size_t>(b)]++) return name(b) + " is free twice";
  }
  if (!std::is_heap(free_.begin(), free_.end(), std::greater<>()))
    return "the free blocks are not a min-heap";
  // Position of each cached block in eviction order, -1 for none.
  std::vector<int64_t> lru_pos(total, -1);
  int64_t pos = 0;
  for (auto it = lru_.begin(); it != lru_.end(); ++it, ++pos) {
    const int32_t b = *it;
    if (b < 0 || static_cast<size_t>(b) >= total) return "cached " + name(b) + " is out of range";
    const auto u = static_cast<size_t>(b);
    if (lru_pos[u] >= 0) return name(b) + " is cached twice";
    if (blocks_[u].lru != it)
      return "cached " + name(b) + " has a stale place in the eviction order";
    lru_pos[u] = pos;
  }
  for (size_t u = 0; u < total; ++u) {
    const Block& block = blocks_[u];
    const auto b = static_cast<int32_t>(u);
    const bool used = block.refs > 0;
    const bool cached = lru_pos[u] >= 0;
    const bool free = in_free[u] != 0;
    if (used + cached + free != 1) {
      return name(b) + " is used " + std::to_string(used) + ", cached " + std::to_string(cached) +
             ", free " + std::to_string(free);
    }
    if (block.refs != named[u]) {
      return name(b) + " has " + std::to_string(block.refs) + " references but " +
             std::to_string(named[u]) + " table entries";
    }
    if (cached && !block.published) return "cached " + name(b) + " is not published";
    if (block.refs > 1 && !block.published) return "shared " + name(b) + " is not published";
    if (free && block.published) return "free " + name(b) + " is published";
  }
  size_t published = 0;
  for (size_t u = 0; u < total; ++u) published += blocks_[u].published;
  if (published != published_.size()) {
    return std::to_string(published) + " blocks are published but " +
           std::to_string(published_.size()) + " keys";
  }
  for (auto it = published_.begin(); it != published_.end(); ++it) {
    const auto& [key, b] = *it;
    if (b < 0 || static_cast<size_t>(b) >= total)
      return "a key maps to " + name(b) + ", out of range";
    const Block& block = blocks_[static_cast<size_t>(b)];
    if (!block.published || block.key != it)
      return "a key maps to " + name(b) + ", which does not map back";
    if (key.second.size() != static_cast<size_t>(block_tokens_))
      return "the key of " + name(b) + " has a wrong size";
    const int32_t before = key.first;
    if (before == -1) continue;
    if (before < 0 || static_cast<size_t>(before) >= total ||
        !blocks_[static_cast<size_t>(before)].published)
      return "published " + name(b) + " is keyed on unpublished " + name(before);
    const int64_t mine = lru_pos[static_cast<size_t>(b)];
    const int64_t theirs = lru_pos[static_cast<size_t>(before)];
    if (mine >= 0 && theirs >= 0 && theirs < mine)
      return "cached " + name(before) + " would be evicted before " + name(b) +
             ", which is keyed on it";
  }
  return "";
}

}  // namespace duet
