// kv_allocator.h — which KV-cache blocks hold which sequence's positions.
//
// This bookkeeping lives in core, not in backends, so every backend is
// compared on identical allocation behaviour. Blocks are handed out lowest
// index first and returned when a sequence is released.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

namespace duet {

class KVAllocator {
 public:
  // REQUIRES: block_tokens > 0 and divides capacity_tokens.
  KVAllocator(int64_t capacity_tokens, int32_t block_tokens);

  int32_t block_tokens() const { return block_tokens_; }
  int64_t capacity_tokens() const { return capacity_; }

  // Positions `seq` holds (0 for an unknown sequence).
  int32_t length(int32_t seq) const;

  // Positions that could still be appended to `seq`: the unused tail of its
  // last block plus every free block.
  int64_t room(int32_t seq) const;

  // Grows `seq` by `n` positions, taking blocks as needed. Returns false and
  // changes nothing when room(seq) < n.
  bool append(int32_t seq, int32_t n);

  // Cache slot of position `pos` of `seq`. REQUIRES: pos < length(seq).
  int32_t slot(int32_t seq, int32_t pos) const;

  // Blocks of `seq` in position order (empty for an unknown sequence).
  const std::vector<int32_t>& block_table(int32_t seq) const;

  // Shrinks `seq` to its first `n` positions (no change when it holds n or
  // fewer) and returns the blocks it no longer needs to the pool; the slots
  // of the dropped positions are handed out again by later appends.
  // REQUIRES: n >= 0.
  void truncate(int32_t seq, int32_t n);

  // Returns every block of `seq` to the pool.
  void release(int32_t seq);

 private:
  struct Sequence {
    int32_t length = 0;
    std::vector<int32_t> blocks;
  };
  int64_t capacity_;
  int32_t block_tokens_;
  std::vector<int32_t> free_blocks_;  // a stack, lowest index on top
  std::map<int32_t, Sequence> sequences_;

  // Pushes `blocks` back onto the free stack, lowest index on top.
  void give_back(std::vector<int32_t>::const_iterator begin,
                 std::vector<int32_t>::const_iterator end);
};

}  // namespace duet
