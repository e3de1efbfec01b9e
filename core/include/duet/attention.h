// duet/attention.h — attention over the KV cache, as a backend implements it.
#pragma once

#include <cstdint>
#include <vector>

#include "duet/kv_cache.h"
#include "duet/support.h"
#include "duet/tensor.h"

namespace duet {

struct AttentionSpec {
  int32_t n_heads = 0;     // query heads
  int32_t n_kv_heads = 0;  // key/value heads; n_heads is a multiple of it (GQA)
  int32_t head_dim = 0;
  float scale = 0.0f;  // applied to q·k, usually 1/sqrt(head_dim)
};

// One sequence's part of a step.
struct SequenceStep {
  int32_t seq_id = 0;
  int32_t first_token = 0;  // index of its first token in the step's rows
  int32_t n_tokens = 0;     // its tokens in this step
  int32_t context_len = 0;  // cached positions after this step, new ones included
  // Cache blocks holding positions [0, context_len), in order: position p
  // lives in slot block_table[p / block_tokens] * block_tokens + p % block_tokens.
  std::vector<int32_t> block_table;
};

// Per-step metadata, built once by core and shared by every layer. Host
// memory; a device backend copies what it needs. Tokens of one sequence are
// consecutive rows in positional order.
struct StepBatch {
  int32_t n_tokens = 0;
  int32_t n_prefill_tokens = 0;       // rows that belong to prompts
  int32_t n_decode_tokens = 0;        // rows that are single generated tokens
  std::vector<int32_t> positions;     // [n_tokens] absolute positions
  std::vector<int32_t> slot_mapping;  // [n_tokens] cache slot receiving each row's K/V
  std::vector<SequenceStep> sequences;
};

// Thread-safety: none; one pipeline uses an Attention at a time.
class Attention {
 public:
  virtual ~Attention() = default;

  // Whether this implementation can read `kv`'s layout and dtype; reasons
  // name the mismatch and what would be accepted.
  virtual Support check(const KVCacheSpec& kv) const = 0;

  // For each row i: writes k[i], v[i] into slot slot_mapping[i] of `layer`,
  // then out[i] = softmax(scale · q[i]·Kᵀ) · V over the positions
  // [0, positions[i]] of row i's sequence (causal).
  // q, out: f32 [n_tokens, n_heads, head_dim]; k, v: f32 [n_tokens,
  // n_kv_heads, head_dim]. REQUIRES: check(kv.spec()).ok().
  virtual void forward(int32_t layer, const StepBatch& step, const TensorView& q,
                       const TensorView& k, const TensorView& v, KVCache& kv, TensorView out) = 0;
};

}  // namespace duet
