#include "cuda_kv_cache.h"

#include "cuda_error.h"

namespace duet::cuda {

CacheType cache_type(DType dtype) {
  if (dtype == DType::kF16) return CacheType::kF16;
  if (dtype == DType::kQ8_0) return CacheType::kQ8_0;
  return CacheType::kF32;
}

Support CudaKVCache::check(const KVCacheSpec& spec) {
  return check_contiguous_kv_cache(spec, "cuda", {DType::kF32, DType::kF16, DType::kQ8_0});
}

CudaKVCache::CudaKVCache(const KVCacheSpec& spec, CudaDevice& device, ForwardPass& pass)
    : RowKVCache(spec, device), pass_(pass) {
  check_cuda(cudaMemsetAsync(storage().data(), 0, storage().size(), device.stream()),
             "clearing the KV cache");
}

void CudaKVCache::write(int32_t layer, const StepBatch& step, const TensorView& k,
                        const TensorView& v) {
  const KVLayerView view = this->layer(layer);
  const CacheType type = cache_type(spec().dtype);
  pass_.submit(KvStoreCall{KvStoreArgs{k.as<const float>(), v.as<const float>(), view.k, view.v,
                                       type, pass_.metadata(step).row_slot, step.n_tokens,
                                       spec().n_kv_heads * spec().head_dim}});
}

}  // namespace duet::cuda
