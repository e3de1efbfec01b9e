// window_rings.h — where sliding-window layers keep each sequence's keys
// and values: a ring of ring_tokens slots, not a slot per position.
//
// A layer whose attention sees only the last `window` positions (Gemma 3's
// local layers) never reads a position more than window - 1 behind the
// newest, so a sequence needs at most ring_tokens slots for it however long
// it grows: position p goes to ring slot p mod ring_tokens. A step writes
// all its rows before any row reads, so the ring must hold a step's rows
// and the window before its first row: ring_tokens >= window + rows - 1,
// which is why a sequence may run at most max_step_rows() rows a step.
// Rolling a sequence back by at most max_step_rows() - 1 positions (the
// draft rows a step verified) leaves every position the next step reads
// in the ring.
//
// A ring is made of blocks of block_tokens slots, taken from one shared
// pool as the sequence grows (a sequence of length L holds
// ceil(min(L, ring_tokens) / block_tokens) of them) and given back when it
// is released. Attention finds a position's slot through the block table
// the window cache's StepBatch gives it (map_step): entry j of a sequence's
// table is its ring block j mod (ring_tokens / block_tokens), so positions
// a window no longer sees share slots with newer ones. Ring blocks are
// never shared between sequences.
//
// Misuse throws duet::Error(kInternal) and changes nothing.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "duet/step_batch.h"

namespace duet {

struct WindowRingGeometry {
  int32_t window = 0;        // the largest window of the layers the rings serve
  int32_t ring_tokens = 0;   // slots of one sequence's whole ring
  int32_t block_tokens = 0;  // slots per ring block; divides ring_tokens
  int64_t pool_tokens = 0;   // slots of all rings together; a multiple of block_tokens
};

// The geometry core gives window layers:
// - blocks of the full cache's `block_tokens` when that is at most 64 (the
//   same cuts of a sequence's positions into blocks, which a
//   batch-invariant attention sums block by block), else of 16;
// - rings of twice the window rounded up to whole blocks, so that a
//   sequence runs up to ring_tokens - window + 1 rows a step (window + 1
//   where the block size divides 2 × window);
// - a pool for `max_sequences` whole rings but no larger than
//   `capacity_tokens` rounded up to whole blocks (the slots the sequences
//   hold between them in the full cache).
// REQUIRES: every argument positive.
WindowRingGeometry window_ring_geometry(int32_t window, int32_t max_sequences,
                                        int64_t capacity_tokens, int32_t block_tokens);

class WindowRings {
 public:
  // REQUIRES: 0 < window <= ring_tokens, block_tokens > 0 dividing
  // ring_tokens and pool_tokens, pool_tokens <= 2^31 - 1.
  explicit WindowRings(const WindowRingGeometry& geometry);

  const WindowRingGeometry& geometry() const { return g_; }
  // Rows one sequence may run in a step: ring_tokens - window + 1.
  int32_t max_step_rows() const { return g_.ring_tokens - g_.window + 1; }
  int64_t total_blocks() const { return static_cast<int64_t>(owner_.size()); }
  int64_t free_blocks() const { return static_cast<int64_t>(free_.size()); }

  // Positions `seq`, now `length` long, may still grow by before the pool
  // runs out (INT64_MAX once its ring is whole, or would be with the free
  // blocks).
  int64_t room(int32_t seq, int32_t length) const;
  // Takes the blocks `seq` needs to be `length` long; false, changing
  // nothing, when the pool has too few. REQUIRES: seq >= 0, length >= 0.
  bool grow(int32_t seq, int32_t length);
  // Whether the ring of `seq` has a slot for every position below `length`
  // (the newest ring_tokens of them, once it is whole).
  bool covers(int32_t seq, int32_t length) const;
  // Gives back every block of `seq`.
  void release(int32_t seq);

  // Ring slot of position `pos` of `seq`. REQUIRES: pos >= 0 and `seq`
  // grown past pos (or its ring whole).
  int32_t slot(int32_t seq, int32_t pos) const;

  // `step` (built over the full cache) for the window layers' cache: the
  // same rows, positions and sequences, each row's slot and each
  // sequence's block table in its ring. REQUIRES: every sequence of the
  // step grown to its context_len, and no sequence running more than
  // max_step_rows() rows.
  void map_step(const StepBatch& step, StepBatch& out) const;

  // The first broken invariant, or "" when all hold: every block is free
  // or in exactly one ring, no ring holds more than ring_tokens slots, and
  // the free blocks are a min-heap. For tests.
  std::string check() const;

 private:
  WindowRingGeometry g_;
  int32_t ring_blocks_ = 0;
  std::map<int32_t, std::vector<int32_t>> rings_;
  std::vector<int32_t> owner_;  // the sequence holding each block, -1 when free
  std::vector<int32_t> free_;   // a min-heap (std::greater): lowest index on top

  const std::vector<int32_t>& ring(int32_t seq) const;
  // Ring blocks a sequence of `length` positions holds.
  int64_t blocks_for(int32_t length) const;
};

}  // namespace duet
