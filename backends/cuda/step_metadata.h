// step_metadata.h — a StepBatch's per-row metadata laid out as the attention
// kernels read it from device memory.
//
// Device layout, in int32 elements, for capacities R (rows) and T (block
// table entries):
//   [0, R)        row_position  positions[i]: row i sees positions [0, it]
//   [R, 2R)       row_slot      slot_mapping[i]: where row i's K/V go
//   [2R, 3R)      row_table     where row i's sequence's table starts in tables
//   [3R, 3R + T)  tables        every sequence's block table, in order
// Capacities only grow, to powers of two, so the arrays keep their device
// addresses from one decode step to the next — which is what lets a CUDA
// graph captured at one step read the metadata of every later one.
// Pure host code; thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "duet/attention.h"

namespace duet::cuda {

struct StepLayout {
  int64_t rows = 0;    // R
  int64_t tables = 0;  // T
  int64_t elements() const { return 3 * rows + tables; }
  int64_t row_position() const { return 0; }
  int64_t row_slot() const { return rows; }
  int64_t row_table() const { return 2 * rows; }
  int64_t block_tables() const { return 3 * rows; }
  bool operator==(const StepLayout&) const = default;
};

// `current` when `step` fits in it; otherwise the layout whose capacities
// are the smallest powers of two (at least 16, and at least current's) that
// hold step's rows and block-table entries.
StepLayout layout_for(const StepBatch& step, const StepLayout& current);

// Elements of the layout that `step` uses: everything up to the end of its
// last block table (what has to be copied to the device).
int64_t used_elements(const StepBatch& step, const StepLayout& layout);

// Writes `step` in `layout` to out[0, used_elements(step, layout)); unused
// row entries are 0. REQUIRES: layout_for(step, layout) == layout.
void pack_step(const StepBatch& step, const StepLayout& layout, int32_t* out);

}  // namespace duet::cuda
