#include "attention_split.h"

namespace duet::cuda {

AttentionSplit choose_attention_split(int64_t positions, int64_t split_above) {
  if (split_above <= 0 || positions <= split_above) return {};
  int64_t stretch = kMinSplitPositions;
  while (stretch * kMaxAttentionSplits < positions) stretch *= 2;
  int64_t splits = 1;
  while (splits * stretch < positions) splits *= 2;
  if (splits == 1) return {};
  return {static_cast<int32_t>(splits), static_cast<int32_t>(stretch)};
}

}  // namespace duet::cuda
