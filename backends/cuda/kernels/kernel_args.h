// kernel_args.h — the argument structs of the CUDA kernels, as plain data.
//
// This header includes no CUDA header: host code that only builds, compares
// or fuses kernel calls (commands.h, command_fusion.h) and its unit tests use
// it without the CUDA toolkit. Every pointer is a device pointer; sizes are
// in elements. Each struct compares member by member, which is how a decode
// pass is recognised as identical to the one a CUDA graph holds.
#pragma once

#include <array>
#include <cstdint>

namespace duet::cuda {

// One weight matrix of a matrix-vector product: out[i, r] = w[r, :] · x[i, :]
// for r in [0, rows) and each row i of x (out is [x rows, rows]).
struct GemvSegment {
  const void* w = nullptr;
  float* out = nullptr;
  int64_t rows = 0;
  bool operator==(const GemvSegment&) const = default;
};

// Up to this many matrices that share one input vector run as one launch.
inline constexpr int kMaxGemvSegments = 3;
using GemvSegments = std::array<GemvSegment, kMaxGemvSegments>;

// A warp multiplies one weight row with up to this many rows of x, decoding
// each weight block once for all of them; more rows of x are taken in
// chunks of this many by neighbouring blocks (which then read the weights
// from L2). Row i of x gets exactly the operations it gets alone, so a
// product's rows do not depend on how many rows it has.
inline constexpr int32_t kGemvChunkRows = 8;

// One tensor rotated by RoPE: x is [rows, heads, head_dim].
struct RopeTarget {
  float* x = nullptr;
  int32_t heads = 0;
  bool operator==(const RopeTarget&) const = default;
};

// The element type of the KV cache's rows: f32; IEEE binary16 rounded to
// nearest even (as duet/quant.h's f32_to_f16); or q8_0 blocks of 32
// (an f16 scale amax / 127, then round-half-away(x / scale) as int8, as
// duet/quant.h quantizes). Either way the rows are the reference backend's
// bytes (NaN payloads aside).
enum class CacheType : int32_t { kF32, kF16, kQ8_0 };

// Writes row i of k and v ([n_tokens, row_elements]) into cache slot
// row_slot[i] of one layer's K and V ([slot, row_elements] of `cache`).
struct KvStoreArgs {
  const float* k = nullptr;
  const float* v = nullptr;
  void* k_cache = nullptr;
  void* v_cache = nullptr;
  CacheType cache = CacheType::kF32;
  const int32_t* row_slot = nullptr;  // [n_tokens], device
  int32_t n_tokens = 0;
  int32_t row_elements = 0;  // n_kv_heads * head_dim
  bool operator==(const KvStoreArgs&) const = default;
};

// Causal attention of n_tokens query rows, rows first_row.. of the step,
// over one layer's cache (a step's rows may take several launches). Row i
// sees positions [0, row_position[i]] of its sequence; position p lives in
// slot block_tables[row_table[i] + p / block_tokens] * block_tokens +
// p % block_tokens. Everything that changes from one decode step to the next
// (positions, slots, tables) is read from device memory, never passed by
// value, so a captured launch stays valid for later steps.
//
// When k_new is set every row is the single new token of its sequence (a
// decode step): position row_position[i] is then read from k_new/v_new row
// i instead of the cache, and the kernel itself stores that row in slot
// row_slot[i] (no kv_store launch). Nothing in the launch reads the slots it
// writes, so the order of the two does not matter. k_new is for an f32
// cache only: an f16 or q8_0 cache's newest row must be read back rounded,
// so its decode steps store first (KvStoreArgs) and then attend over the
// cache.
struct AttentionArgs {
  const float* q = nullptr;  // [n_tokens, n_heads, head_dim]
  float* out = nullptr;      // [n_tokens, n_heads, head_dim]
  void* k_cache = nullptr;   // [slot, n_kv_heads, head_dim] of `cache`
  void* v_cache = nullptr;
  CacheType cache = CacheType::kF32;
  const int32_t* row_position = nullptr;  // [n_tokens], device
  const int32_t* row_table = nullptr;     // [n_tokens], device
  const int32_t* block_tables = nullptr;  // device
  const float* k_new = nullptr;  // [n_tokens, n_kv_heads, head_dim], 16-byte aligned, or null
  const float* v_new = nullptr;
  const int32_t* row_slot = nullptr;  // [n_tokens], device; with k_new
  int32_t n_tokens = 0;
  int32_t n_heads = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t block_tokens = 0;
  float scale = 0.0f;
  // A sliding-window layer's window (AttentionSpec::window): a row at
  // position p sees positions [max(0, p - window + 1), p]; 0 sees [0, p].
  int32_t window = 0;
  // Split over the context (flash-decoding), for steps of at most
  // kMaxSplitRows rows: with splits > 1, positions are cut into stretches of
  // split_positions (a multiple of 32; splits * split_positions covers every
  // row's positions); block (row, head, s) attends over stretch s alone and
  // leaves its max, sum and unnormalised output in partials, and a second
  // kernel merges a row's stretches into out. Stretches past a row's last
  // position are skipped. Both are chosen on the host from the step's
  // positions, in powers of two, so that a CUDA graph rarely changes.
  // [n_tokens, n_heads, splits, head_dim + 2]: room for kMaxSplitRows rows
  // of kMaxAttentionSplits stretches
  float* partials = nullptr;
  int32_t splits = 1;
  int32_t split_positions = 0;
  // Every row attended with the block shape a decode step of a few rows
  // gets, whatever n_tokens is, so that a row's output depends on its own
  // sequence only (the backend's batch_invariant option; never with splits).
  bool batch_invariant = false;
  int32_t first_row = 0;
  // The rows are one sequence's, in positional order (a prompt chunk):
  // tiles of kAttentionTileRows rows share each K/V row they read
  // (prefill_attention.cu) instead of one block per row. Not with k_new,
  // splits or batch_invariant.
  bool tiled = false;
  bool operator==(const AttentionArgs&) const = default;
};

// Limits of the split attention above.
inline constexpr int32_t kMaxAttentionSplits = 64;
inline constexpr int32_t kMaxSplitRows = 8;
inline constexpr int32_t kMinSplitPositions = 128;

// Query rows per block of the tiled attention, and the fewest rows of one
// sequence in a step that the backend sends to it.
inline constexpr int32_t kAttentionTileRows = 32;
inline constexpr int32_t kMinTiledRows = 16;
inline constexpr int32_t kMaxTiledHeadDim = 128;

// The largest head dimension the attention kernel keeps in registers.
inline constexpr int32_t kMaxAttentionHeadDim = 256;

}  // namespace duet::cuda
