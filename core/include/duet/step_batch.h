// duet/step_batch.h — what one forward pass runs: which rows belong to
// which sequence, their positions and the cache slots they go to.
#pragma once

#include <cstdint>
#include <vector>

#include "duet/export.h"

namespace duet {

// One sequence's part of a step.
struct DUET_API SequenceStep {
  int32_t seq_id = 0;
  int32_t first_token = 0;  // index of its first token in the step's rows
  int32_t n_tokens = 0;     // its tokens in this step
  int32_t context_len = 0;  // cached positions after this step, new ones included
  // Cache blocks holding positions [0, context_len), in order: position p
  // lives in slot block_table[p / block_tokens] * block_tokens + p % block_tokens.
  // For the sliding-window layers of a cache that keeps them in rings
  // (components.kv_cache.window_layers: ring), entry j is the sequence's
  // ring block j mod (ring blocks): only the positions of each row's window
  // (AttentionSpec::window) are where the formula says; older ones have
  // been overwritten by newer positions.
  std::vector<int32_t> block_table;
};

// Per-step metadata, built once by core and shared by every layer. Host
// memory; a device backend copies what it needs. Tokens of one sequence are
// consecutive rows in positional order.
struct DUET_API StepBatch {
  int32_t n_tokens = 0;
  // Rows of the sequences that run several rows in this step (prompt
  // chunks, draft verification), so 0 means one row per sequence, as in a
  // decode step. Sessions and the batching scheduler fill it the same way
  // (one builder in core); `sequences` has the detail.
  int32_t n_prefill_tokens = 0;
  int32_t reserved = 0;               // unused; keeps the ABI 1.x layout
  std::vector<int32_t> positions;     // [n_tokens] absolute positions
  std::vector<int32_t> slot_mapping;  // [n_tokens] cache slot receiving each row's K/V
  std::vector<SequenceStep> sequences;
};

}  // namespace duet
