// kv_allocator.h — which KV-cache blocks hold which sequence's positions,
// and which blocks hold a known prefix that a later sequence may share.
//
// This bookkeeping lives in core, not in backends, so every backend is
// compared on identical allocation behaviour. A block is in one of three
// states:
//   used     held by one or more sequences (its reference count);
//   cached   held by none, but its contents are a published prefix block
//            that attach_prefix() can hand to a new sequence;
//   free     held by none and holding nothing anyone may reuse.
// Fresh blocks are handed out lowest index first; when no free block is
// left, the least recently released cached block is evicted (unpublished)
// and reused. The blocks a sequence drops at once count as released from
// its last block back, and whoever holds a published block holds the one
// before it, so a block always outlasts in the cache the cached blocks that
// continue its prefix: no published block ever names an evicted one.
// free_blocks() counts free and cached blocks alike: both can be taken.
//
// A published block is identified by its content: the block before it in
// its sequence (none for the first) and the block_tokens token ids it holds,
// so equal keys mean equal tokens at equal positions. Published blocks are
// never written again, and they are the only ones sequences share: a
// sequence that would write into one first gets a private copy (copy on
// write), and append() reports the copies the caller must make on every
// cache before the forward pass writes.
//
// A model with sliding-window layers may keep those layers' keys and values
// in rings (kv/window_rings.h) instead: the allocator then also gives each
// sequence its ring blocks as it grows and takes them back with its full
// blocks, room() counts both, a sequence runs at most max_step_rows() rows a
// step, and no prefix is shared (a ring holds only the last positions of the
// sequence that wrote it): attach_prefix() attaches nothing, publish()
// publishes nothing.
//
// Misuse (a broken REQUIRES) throws duet::Error(kInternal) and changes
// nothing; no call asserts.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kv/window_rings.h"

namespace duet {

class KVAllocator {
 public:
  // A whole block, all layers, to copy from src to dst (KVCache::copy_blocks).
  struct BlockCopy {
    int32_t src = 0;
    int32_t dst = 0;
  };

  // REQUIRES: block_tokens > 0 and divides capacity_tokens <= 2^31 - 1;
  // `rings` as WindowRings requires.
  KVAllocator(int64_t capacity_tokens, int32_t block_tokens,
              std::optional<WindowRingGeometry> rings = std::nullopt);
  ~KVAllocator();
  // Not copyable: it holds iterators into its own containers.
  KVAllocator(const KVAllocator&) = delete;
  KVAllocator& operator=(const KVAllocator&) = delete;

  int32_t block_tokens() const { return block_tokens_; }
  int64_t capacity_tokens() const { return capacity_; }
  int64_t total_blocks() const;
  // Blocks no sequence holds: free ones plus cached ones (evictable).
  int64_t free_blocks() const;
  // Of those, the ones holding a published prefix block.
  int64_t cached_blocks() const;
  // Blocks some sequence holds: total_blocks() - free_blocks().
  int64_t used_blocks() const;

  // Positions `seq` holds (0 for an unknown sequence).
  int32_t length(int32_t seq) const;

  // The window layers' rings; null when those layers use the full cache.
  const WindowRings* window_rings() const { return rings_.get(); }
  // What to change when the cache has no room: "" without rings, else
  // (starting "; ") the keys that give the rings more, for an error that
  // names the full cache's own fix first.
  std::string ring_room_hint() const;
  // Rows one sequence may run in a step: the rings' bound, else no bound
  // (INT32_MAX).
  int32_t max_step_rows() const;

  // Positions that could still be appended to `seq` without evicting
  // anything another sequence holds: append(seq, n, copies) succeeds exactly
  // when n <= room(seq). That is the unused tail of its last block plus every
  // free or cached block, except when the last block would first need a
  // copy (see append): then the copy takes one of those blocks (none left:
  // room 0), and the old block comes back as cached when `seq` alone held it.
  int64_t room(int32_t seq) const;

  // Grows `seq` by `n` positions, taking blocks as needed, and adds to
  // `copies` the copy on write of its last block when that block is
  // published and position length(seq) falls inside it (a full last block
  // needs none): the new block then replaces the published one in the
  // sequence's table. Returns false and changes
  // nothing when room(seq) < n. REQUIRES: n >= 0.
  bool append(int32_t seq, int32_t n, std::vector<BlockCopy>& copies);

  // The same for a caller that never shares blocks (no attach_prefix, no
  // publish): throws duet::Error(kInternal) if a copy would be needed.
  bool append(int32_t seq, int32_t n);

  // Cache slot of position `pos` of `seq`. REQUIRES: 0 <= pos < length(seq).
  int32_t slot(int32_t seq, int32_t pos) const;

  // Blocks of `seq` in position order (empty for an unknown sequence).
  const std::vector<int32_t>& block_table(int32_t seq) const;

  // Shrinks `seq` to its first `n` positions (no change when it holds n or
  // fewer) and drops its hold on the blocks it no longer needs; the slots of
  // the dropped positions are handed out again by later appends (a shared
  // block is copied first). REQUIRES: n >= 0; with rings, n == 0 or at most
  // max_step_rows() - 1 positions dropped (a step's rejected drafts).
  void truncate(int32_t seq, int32_t n);

  // Drops every hold of `seq`: blocks nobody else holds become cached when
  // published, free otherwise.
  void release(int32_t seq);

  // For `seq`, which must hold nothing: attaches the longest chain of
  // published blocks whose tokens are the first tokens of `tokens`, and
  // makes its length the positions they cover, at most `max_positions`
  // (a last block covered only in part is still attached; appending into it
  // copies it; a block starting at or past `max_positions` is not attached).
  // Returns that length (0 when nothing matched). The blocks become used.
  // REQUIRES: length(seq) == 0 and max_positions >= 0.
  int32_t attach_prefix(int32_t seq, std::span<const int32_t> tokens, int32_t max_positions);

  // Publishes every block of `seq` that is full (all block_tokens positions
  // below length(seq)) and not yet published, keyed by its predecessor and
  // its tokens: tokens[i] is the token at position i of the sequence.
  // REQUIRES: tokens.size() >= length(seq). A block whose key is already
  // published by another block stays unpublished (and so does every block
  // after it in the sequence, whose key would name it).
  void publish(int32_t seq, std::span<const int32_t> tokens);

  // Drops every cached block (free_blocks() is unchanged; cached_blocks()
  // becomes 0).
  void clear_cache();

  // The first broken invariant, or "" when all hold: every block is exactly
  // one of used, cached or free; a used block's reference count equals the
  // number of table entries naming it, it is published when that is more
  // than one, and no sequence names a block twice; free + cached + used = total; each sequence
  // holds ceil(length / block_tokens) blocks, of which a leading run is published, keyed on the
  // block before it in the table; every published block's predecessor is
  // published and its key maps back to it; a cached block comes after the
  // cached blocks keyed on it in eviction order. For tests; O(total blocks).
  std::string check() const;

 private:
  struct Sequence {
    int32_t length = 0;
    std::vector<int32_t> blocks;
    size_t published = 0;  // blocks[0, published) are published, the rest not
  };
  // Published content: (predecessor block or -1, token ids) -> block.
  using Key = std::pair<int32_t, std::vector<int32_t>>;
  struct Block {
    int32_t refs = 0;
    bool published = false;
    std::map<Key, int32_t>::iterator key;  // valid when published
    std::list<int32_t>::iterator lru;      // valid when cached
  };

  int64_t capacity_;
  int32_t block_tokens_;
  std::vector<Block> blocks_;
  std::vector<int32_t> free_;  // a min-heap (std::greater): lowest index on top
  std::list<int32_t> lru_;     // cached blocks, least recently released first
  std::map<Key, int32_t> published_;
  std::map<int32_t, Sequence> sequences_;
  std::unique_ptr<WindowRings> rings_;

  // Whether appending to `s` must first copy its last block: position
  // s.length falls inside a published block.
  bool needs_copy(const Sequence& s) const;
  // A block for a new hold (refs 1): the lowest free one, else the least
  // recently released cached one, unpublished. REQUIRES: free_blocks() > 0.
  int32_t take();
  // Drops one hold on block `b`: at no holds it becomes cached (the most
  // recently released) when published, free otherwise.
  void drop(int32_t b);
  // Unpublishes cached block `b` (its key leaves published_, itself the LRU).
  void unpublish_cached(int32_t b);
};

}  // namespace duet
