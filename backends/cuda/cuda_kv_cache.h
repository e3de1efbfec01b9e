// cuda_kv_cache.h — K and V of every layer in device memory, f32, f16 or
// q8_0.
#pragma once

#include "cuda_device.h"
#include "duet/row_kv_cache.h"
#include "forward_pass.h"

namespace duet::cuda {

// Core's slot-row storage (duet/row_kv_cache.h) in device memory, laid out
// as the reference backend's, so export_slots/import_slots move a cache
// between the two unchanged. Zeroed when created. write() queues the
// store kernel in the forward pass (the backend's own attention fuses the
// store into its own command instead).
// The kernels' name for rows of `dtype` (f32, f16 or q8_0). REQUIRES:
// CudaKVCache::check accepts that dtype.
CacheType cache_type(DType dtype);

class CudaKVCache final : public RowKVCache {
 public:
  // Why `spec` cannot be stored here; empty when it can.
  static Support check(const KVCacheSpec& spec);

  // REQUIRES: check(spec).ok(). Throws duet::Error(kOutOfMemory) when the
  // device cannot hold it. `pass` must outlive the cache.
  CudaKVCache(const KVCacheSpec& spec, CudaDevice& device, ForwardPass& pass);

  void write(int32_t layer, const StepBatch& step, const TensorView& k,
             const TensorView& v) override;

 private:
  ForwardPass& pass_;
};

}  // namespace duet::cuda
