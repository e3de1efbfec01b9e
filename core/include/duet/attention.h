// duet/attention.h — attention over the KV cache, as a backend implements it.
#pragma once

#include <cstdint>
#include <string_view>

#include "duet/export.h"
#include "duet/kv_cache.h"
#include "duet/step_batch.h"
#include "duet/support.h"
#include "duet/tensor.h"

namespace duet {

struct DUET_API AttentionSpec {
  int32_t n_heads = 0;     // query heads
  int32_t n_kv_heads = 0;  // key/value heads; n_heads is a multiple of it (GQA)
  int32_t head_dim = 0;
  float scale = 0.0f;  // applied to q·k, usually 1/sqrt(head_dim)
  // (ABI 1.6) Positions a row attends to: 0, all of [0, p] of its sequence;
  // W > 0, only the last W of them, [max(0, p - W + 1), p] (a sliding-window
  // layer, e.g. Gemma 3's local layers). An attention that cannot honour a
  // window refuses it in check(). The host never gives a window to an
  // attention of a plugin built against ABI 1.5 or older (which lacks it).
  // A windowed attention must read no position before a row's window: with
  // components.kv_cache.window_layers: ring, core keeps those layers in
  // rings, and a sequence's block table then names the same blocks again
  // and again (duet/step_batch.h), so slots of positions a window no longer
  // sees hold newer positions.
  int32_t window = 0;
};

// What every attention checks of a cache against its own spec: the cache
// holds spec.n_kv_heads heads of spec.head_dim, and n_heads is a positive
// multiple of n_kv_heads. Reasons name `who`, e.g. "attention 'full' of
// backend 'onednn'".
DUET_API Support check_attention_geometry(const AttentionSpec& spec, const KVCacheSpec& kv,
                                          std::string_view who);

// (ABI 1.6) What every attention checks of spec.window: not negative.
// Reasons name `who`. REQUIRES: a spec of ABI 1.6 or later (a plugin built
// against 1.5 must not call it: its spec ends before `window`).
DUET_API Support check_attention_window(const AttentionSpec& spec, std::string_view who);

// Thread-safety: none; one pipeline uses an Attention at a time.
class DUET_API Attention {
 public:
  virtual ~Attention() = default;

  // Whether this implementation can read a cache of `kv`'s dtype and
  // geometry; reasons name the mismatch and what would be accepted. The
  // storage's own checks (its impl, its options) are the storage's.
  virtual Support check(const KVCacheSpec& kv) const = 0;

  // For each row i: stores k[i], v[i] into slot slot_mapping[i] of `layer`
  // (kv.write(), unless the attention fuses the store for its own backend's
  // storage and writes the same bytes), then computes out[i] from q[i] and
  // the keys and values of the positions its algorithm attends to among
  // [0, positions[i]] of row i's sequence (causal): for the built-in 'full'
  // attention, softmax(scale · q[i]·Kᵀ) · V over all of them, or over the
  // last spec.window of them.
  // q, out: f32 [n_tokens, n_heads, head_dim]; k, v: f32 [n_tokens,
  // n_kv_heads, head_dim]; device memory. REQUIRES: check(kv.spec()).ok().
  virtual void forward(int32_t layer, const StepBatch& step, const TensorView& q,
                       const TensorView& k, const TensorView& v, KVCache& kv, TensorView out) = 0;
};

}  // namespace duet
