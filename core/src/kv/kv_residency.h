// kv_residency.h — which backend's cache holds each KV block's current
// contents, for a pipeline whose stages run on several backends.
//
// Every placement (a backend with its cache, PipelineCheck::placements) has
// a cache of the same geometry, and core's one KVAllocator gives a sequence
// the same slots in each. A block is current in a cache when that cache
// holds what was last written to the block: written there by a forward
// pass, or moved there since. Before a sequence runs on a placement, the
// blocks holding its positions so far that are not current there move in
// from a cache where they are (kv_handover.h) — at a change of stage, and
// for a cached prefix block another placement wrote last — and the blocks
// the pass writes become current there alone. A block current in a cache
// stays so until written elsewhere, so a prompt prefilled on one backend is
// never moved back to it after decoding elsewhere; only the blocks the
// other backend wrote are.
//
// Sessions and the batching scheduler keep it alike, so a sequence's cache
// holds the same bytes whichever ran it. With one placement nothing is
// tracked and nothing moves.
#pragma once

#include <cstdint>
#include <vector>

#include "kv/kv_allocator.h"
#include "kv/kv_handover.h"

namespace duet {

class KVResidency {
 public:
  // `caches`: one per placement, in placement order (at most 32).
  // REQUIRES: the caches outlive this and have allocator.total_blocks()
  // blocks.
  KVResidency(std::vector<KVEndpoint> caches, const KVAllocator& allocator);

  // Makes the blocks holding positions [0, first) of sequence `seq` current
  // in placement `at`, moving those that are not from where they are.
  // Returns what moved (nothing: zero bytes). Throws duet::Error(kInternal)
  // for a block current nowhere (a position never written).
  HandoverStats move_in(int32_t seq, int32_t first, size_t at);

  // Positions [first, end) of `seq` were written in placement `at` (call it
  // after the write succeeded): their blocks are current there alone.
  void written(int32_t seq, int32_t first, int32_t end, size_t at);

  // Block `dst` became a copy of block `src` in every cache where `src` is
  // current (copy on write): makes those copies and records them.
  void copy_block(int32_t src, int32_t dst);

 private:
  std::vector<KVEndpoint> caches_;
  const KVAllocator& allocator_;
  std::vector<uint32_t> current_in_;  // per block, a bit per placement
  std::vector<SlotRange> ranges_;     // scratch for move_in
  std::vector<size_t> sources_;       // scratch for move_in: each block's source
};

}  // namespace duet
