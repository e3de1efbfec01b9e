#include "step_metadata.h"

#include <algorithm>
#include <cstring>

namespace duet::cuda {
namespace {

int64_t table_entries(const StepBatch& step) {
  int64_t n = 0;
  for (const SequenceStep& s : step.sequences) n += static_cast<int64_t>(s.block_table.size());
  return n;
}

int64_t grown(int64_t capacity, int64_t needed) {
  if (needed <= capacity) return capacity;
  int64_t c = std::max<int64_t>(capacity, 16);
  while (c < needed) c *= 2;
  return c;
}

}  // namespace

StepLayout layout_for(const StepBatch& step, const StepLayout& current) {
  return StepLayout{grown(current.rows, step.n_tokens), grown(current.tables, table_entries(step))};
}

int64_t used_elements(const StepBatch& step, const StepLayout& layout) {
  return layout.block_tables() + table_entries(step);
}

void pack_step(const StepBatch& step, const StepLayout& layout, int32_t* out) {
  std::memset(out, 0, static_cast<size_t>(layout.block_tables()) * sizeof(int32_t));
  const auto n = static_cast<size_t>(step.n_tokens);
  std::copy_n(step.positions.begin(), n, out + layout.row_position());
  std::copy_n(step.slot_mapping.begin(), n, out + layout.row_slot());
  int32_t offset = 0;
  for (const SequenceStep& s : step.sequences) {
    for (int32_t i = s.first_token; i < s.first_token + s.n_tokens; ++i)
      out[layout.row_table() + i] = offset;
    std::copy(s.block_table.begin(), s.block_table.end(), out + layout.block_tables() + offset);
    offset += static_cast<int32_t>(s.block_table.size());
  }
}

}  // namespace duet::cuda
