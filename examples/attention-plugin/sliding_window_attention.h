// sliding_window: attention over the most recent `window` positions plus the
// first `sinks` positions of each sequence — sliding-window attention with
// attention sinks, as in StreamingLLM (Xiao et al. 2023, "Efficient Streaming
// Language Models with Attention Sinks").
//
// The row at position p attends to positions [max(0, p - window + 1), p] and
// to positions [0, sinks) that lie before that window. Positions stay
// absolute: keys keep the rotary embedding of the position they were written
// at (no re-rotation into a cache-relative position, which StreamingLLM adds
// for lengths past the model's training context), so the cache still holds
// every position and only the attention is restricted. With a window of at
// least the context length it attends to every position and computes exactly
// what the reference backend's 'full' attention computes (same order of
// operations, double accumulation), so logits are bit-for-bit those of
// 'full' there.
//
// Reads f32, f16 or q8_0 slot rows of any storage (KVLayerView::tile_slots
// 0) on a backend whose device memory is host memory.
#pragma once

#include <duet/attention.h>

#include <cstdint>
#include <vector>

namespace duet_example {

struct SlidingWindow {
  int64_t window = 0;  // >= 1: positions ending at the row's own
  int64_t sinks = 0;   // >= 0: leading positions always attended to

  // The first position of the window of a row at `position`.
  int64_t window_start(int64_t position) const {
    return position - window + 1 > 0 ? position - window + 1 : 0;
  }
  // The sink positions before that window: [0, sink_end(position)).
  int64_t sink_end(int64_t position) const {
    const int64_t start = window_start(position);
    return sinks < start ? sinks : start;
  }
};

class SlidingWindowAttention final : public duet::Attention {
 public:
  SlidingWindowAttention(const duet::AttentionSpec& spec, SlidingWindow window)
      : spec_(spec), window_(window) {}

  // check_kv_rows for f32, f16, q8_0 plus the head geometry.
  duet::Support check(const duet::KVCacheSpec& kv) const override;
  // Stores the step's rows with kv.write(), then attends as described above.
  void forward(int32_t layer, const duet::StepBatch& step, const duet::TensorView& q,
               const duet::TensorView& k, const duet::TensorView& v, duet::KVCache& kv,
               duet::TensorView out) override;

 private:
  duet::AttentionSpec spec_;
  SlidingWindow window_;
  // Scratch reused across calls: expanded keys and values, softmax terms.
  std::vector<float> keys_, values_;
  std::vector<double> scores_, acc_;
};

}  // namespace duet_example
