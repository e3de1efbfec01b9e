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

std::vector<AttentionRows> attention_rows(const StepBatch& step, bool tiled) {
  const std::vector<AttentionRows> all = {AttentionRows{0, step.n_tokens, false}};
  if (!tiled) return all;
  std::vector<AttentionRows> out;
  int32_t next = 0;  // the row the next sequence must start at
  for (const SequenceStep& s : step.sequences) {
    if (s.first_token != next || s.n_tokens < 0) return all;
    next += s.n_tokens;
    if (s.n_tokens == 0) continue;
    const bool tile = s.n_tokens >= kMinTiledRows;
    if (!tile && !out.empty() && !out.back().tiled) {
      out.back().n_rows += s.n_tokens;
    } else {
      out.push_back(AttentionRows{s.first_token, s.n_tokens, tile});
    }
  }
  return next == step.n_tokens ? out : all;
}

}  // namespace duet::cuda
