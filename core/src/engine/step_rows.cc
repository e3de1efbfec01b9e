#include "engine/step_rows.h"

namespace duet {

void add_sequence_rows(StepBatch& step, const KVAllocator& allocator, int32_t seq, int32_t rows) {
  const int32_t length = allocator.length(seq);
  for (int32_t p = length - rows; p < length; ++p) {
    step.positions.push_back(p);
    step.slot_mapping.push_back(allocator.slot(seq, p));
  }
  step.sequences.push_back(
      SequenceStep{seq, step.n_tokens, rows, length, allocator.block_table(seq)});
  step.n_tokens += rows;
  if (rows > 1) step.n_prefill_tokens += rows;
}

}  // namespace duet
