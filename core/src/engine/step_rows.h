// step_rows.h — the one place that fills a forward pass's StepBatch, for a
// Session's passes and the batching scheduler's alike (internal to core).
#pragma once

#include <cstdint>

#include "duet/step_batch.h"
#include "kv/kv_allocator.h"

namespace duet {

// Appends to `step` the last `rows` positions `allocator` holds for
// sequence `seq` (its newest, just appended): their positions and cache
// slots, and the sequence's SequenceStep with its block table. They count
// in n_prefill_tokens when rows > 1 — the one definition backends read: 0
// means every sequence of the step runs one row. REQUIRES: 0 < rows <=
// allocator.length(seq).
void add_sequence_rows(StepBatch& step, const KVAllocator& allocator, int32_t seq, int32_t rows);

}  // namespace duet
