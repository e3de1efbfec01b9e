// attention_split.h — how a step's attention is cut into launches: decode
// attention over a long context into stretches of positions for many blocks
// (flash-decoding; see AttentionArgs::splits), and a step's rows into
// ranges for the per-row kernel and for the tiled one (prompt chunks; see
// AttentionArgs::tiled). Host code without CUDA headers, for unit tests.
#pragma once

#include <cstdint>
#include <vector>

#include "duet/step_batch.h"
#include "kernel_args.h"

namespace duet::cuda {

struct AttentionSplit {
  int32_t splits = 1;           // 1: no split
  int32_t split_positions = 0;  // positions per stretch
  bool operator==(const AttentionSplit&) const = default;
};

// How a step whose rows see at most `positions` positions is split: not at
// all when split_above is 0 or positions <= split_above; else stretches of
// kMinSplitPositions * 2^j positions (the least j for which
// kMaxAttentionSplits of them cover `positions`) and the least power of two
// of them that does.
AttentionSplit choose_attention_split(int64_t positions, int64_t split_above);

// Rows [first_row, first_row + n_rows) of a step, for one attention launch.
struct AttentionRows {
  int32_t first_row = 0;
  int32_t n_rows = 0;
  bool tiled = false;  // one sequence's consecutive positions, for the tiled kernel
  bool operator==(const AttentionRows&) const = default;
};

// The launches for `step`'s rows, in row order, covering every row once:
// with `tiled`, each sequence of at least kMinTiledRows rows is a tiled
// range of its own; the other rows form per-row ranges, neighbours merged.
// Without `tiled`, or when the sequences do not lie in row order one after
// another, one per-row range of every row.
std::vector<AttentionRows> attention_rows(const StepBatch& step, bool tiled);

}  // namespace duet::cuda
