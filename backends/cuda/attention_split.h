// attention_split.h — how decode attention over a long context is cut into
// stretches of positions for many blocks (flash-decoding; see
// AttentionArgs::splits). Host code without CUDA headers, for unit tests.
#pragma once

#include <cstdint>

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

}  // namespace duet::cuda
