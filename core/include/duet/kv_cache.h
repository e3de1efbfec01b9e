// duet/kv_cache.h — storage for every layer's keys and values.
//
// Storage is a set of fixed-size blocks of `block_tokens` slots. Which slots
// belong to which sequence is decided by core (the bookkeeping is identical
// on every backend) and passed to attention in a StepBatch; the storage only
// holds the data. A contiguous cache is the special case of one block per
// sequence holding `capacity_tokens` slots; a paged cache has many small
// blocks; a quantized cache stores K and V in a dtype other than f32.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "duet/dtype.h"
#include "duet/export.h"
#include "duet/step_batch.h"
#include "duet/support.h"
#include "duet/tensor.h"

namespace duet {

struct DUET_API KVCacheSpec {
  std::string impl = "contiguous";  // name in the backend's kv_cache_impls()
  int32_t n_layers = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
  int64_t capacity_tokens = 0;  // slots over all blocks
  int32_t block_tokens = 0;     // slots per block; capacity for contiguous
  DType dtype = DType::kF32;    // element type of stored K and V
};

// The checks of something that stores or reads K and V as slot rows of one
// of `dtypes`: the dtype is among those, and the geometry is usable (every
// count positive, block_tokens divides capacity_tokens, and a block dtype's
// block size divides head_dim, so no block spans two heads). Each reason
// names `who`, the value and the key that fixes it, e.g. "backend 'onednn'
// holds K and V as f32 or f16, not bf16; set components.kv_cache.dtype to
// f32 or f16" ("holds": true of storage that writes them and of an attention
// that only reads them).
DUET_API Support check_kv_rows(const KVCacheSpec& spec, std::string_view who,
                               std::initializer_list<DType> dtypes);

// check_kv_rows() for a backend whose one storage is `contiguous`, plus
// that spec.impl names it.
DUET_API Support check_contiguous_kv_cache(const KVCacheSpec& spec, std::string_view backend,
                                           std::initializer_list<DType> dtypes);

// What KVCache::copy_blocks, export_slots and import_slots must refuse,
// for every backend alike: each throws duet::Error(kInternal) naming the
// values when slots [0, n_slots) or the blocks' slots fall outside
// spec.capacity_tokens, the two block ranges overlap, or an import is not
// the size export_slots gives (2 * n_layers * n_slots rows of the dtype).
DUET_API void check_kv_export(const KVCacheSpec& spec, int64_t n_slots);
DUET_API void check_kv_import(const KVCacheSpec& spec, int64_t n_slots, size_t bytes);
// The same for slots [first_slot, first_slot + n_slots) (export_slot_range,
// import_slot_range).
DUET_API void check_kv_range_export(const KVCacheSpec& spec, int64_t first_slot, int64_t n_slots);
DUET_API void check_kv_range_import(const KVCacheSpec& spec, int64_t first_slot, int64_t n_slots,
                                    size_t bytes);
DUET_API void check_kv_block_copy(const KVCacheSpec& spec, int64_t src_block, int64_t dst_block,
                                  int64_t n);

// Where one layer's K and V live. With tile_slots = 0, slot s of layer l
// holds n_kv_heads * head_dim elements of `dtype` at byte offset s *
// slot_bytes from k (and v), as duet/quant.h's rows. A backend may instead
// keep its own layout in tiles: tile t holds slots [t * tile_slots,
// (t + 1) * tile_slots) in the tile_slots * slot_bytes bytes from
// t * tile_slots * slot_bytes, arranged as its cache header documents, and
// the storage extends to whole tiles past capacity_tokens. Only the
// backend's own attention reads tiles (other attention refuses them), and
// export_slots/import_slots/copy_blocks still move rows.
struct DUET_API KVLayerView {
  void* k = nullptr;
  void* v = nullptr;
  uint64_t slot_bytes = 0;
  int32_t tile_slots = 0;
};

// For attention that reads slot rows only: throws duet::Error(kPlugin)
// naming `attention` when `view` is in a backend's own tiles.
DUET_API void require_slot_rows(const KVLayerView& view, std::string_view attention);

// Thread-safety: none; one pipeline uses a cache at a time.
class DUET_API KVCache {
 public:
  virtual ~KVCache() = default;

  virtual const KVCacheSpec& spec() const = 0;

  // Device bytes this cache holds (keys, values and any scales).
  virtual uint64_t memory_bytes() const = 0;

  // The storage of `layer` in [0, spec().n_layers). Device pointers.
  virtual KVLayerView layer(int32_t layer) = 0;

  // Copies `n` whole blocks, all layers, from block src to block dst
  // (used for copy-on-write of shared prefixes). REQUIRES: both ranges lie
  // within the cache's capacity_tokens / block_tokens blocks and do not
  // overlap; a backend throws duet::Error(kInternal) otherwise
  // (check_kv_block_copy).
  virtual void copy_blocks(int64_t src_block, int64_t dst_block, int64_t n) = 0;

  // Moves the contents of `n_slots` slots starting at slot 0 of every layer
  // to or from host memory laid out as [layer][k|v][slot][head][dim] in
  // spec().dtype: how a cache travels between backends. REQUIRES:
  // 0 <= n_slots <= capacity_tokens, and for import a buffer of exactly the
  // size export gives; duet::Error(kInternal) otherwise (check_kv_export,
  // check_kv_import).
  virtual void export_slots(int64_t n_slots, std::vector<uint8_t>& host_out) = 0;
  virtual void import_slots(int64_t n_slots, const std::vector<uint8_t>& host_in) = 0;

  // ABI 1.1 (appended, so that a 1.0 cache's vtable keeps its order).
  // Stores row i of k and v (f32 [step.n_tokens, n_kv_heads,
  // head_dim], device memory) into slot step.slot_mapping[i] of `layer`, in
  // the cache's dtype and layout: the store every attention makes before it
  // reads. A row is converted as duet/quant.h's quantize_row() converts it,
  // so caches of one dtype hold the same bytes whoever wrote them. Queued on
  // the device like any op of the forward pass.
  virtual void write(int32_t layer, const StepBatch& step, const TensorView& k,
                     const TensorView& v) = 0;

  // ABI 1.4 (appended). export_slots/import_slots for slots [first_slot,
  // first_slot + n_slots) only, laid out the same way ([layer][k|v][slot]
  // [head][dim], n_slots slots a part): how one sequence's blocks move to
  // another backend's cache while the other sequences' slots stay as they
  // are. REQUIRES: the range lies within capacity_tokens, and an import is
  // the size the export of that range gives; duet::Error(kInternal)
  // otherwise (check_kv_range_export, check_kv_range_import). These base
  // versions work for any storage through export_slots/import_slots of
  // slots [0, first_slot + n_slots), so they move the whole prefix before
  // the range (an import reads it back first); RowKVCache overrides both to
  // move the range alone. Core calls these base versions, not the virtual
  // ones, on caches of plugins built against ABI 1.3 or older.
  virtual void export_slot_range(int64_t first_slot, int64_t n_slots,
                                 std::vector<uint8_t>& host_out);
  virtual void import_slot_range(int64_t first_slot, int64_t n_slots,
                                 const std::vector<uint8_t>& host_in);
};

}  // namespace duet
