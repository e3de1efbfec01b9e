#include "duet/kv_cache.h"

#include <algorithm>

namespace duet {

Support check_contiguous_kv_cache(const KVCacheSpec& spec, std::string_view backend,
                                  std::initializer_list<DType> dtypes) {
  Support s;
  const std::string who = "backend '" + std::string(backend) + "'";
  if (spec.impl != "contiguous") {
    s.reasons.push_back(who + " stores KV caches as 'contiguous' only, not '" + spec.impl +
                        "'; set components.kv_cache.impl to contiguous");
  }
  if (std::find(dtypes.begin(), dtypes.end(), spec.dtype) == dtypes.end()) {
    // "f32", "f32 or f16", "f32, f16 or q8_0".
    std::string names;
    size_t i = 0;
    for (DType t : dtypes) {
      names += (i == 0 ? "" : i + 1 == dtypes.size() ? " or " : ", ") + std::string(dtype_name(t));
      ++i;
    }
    s.reasons.push_back(who + " stores K and V as " + names + ", not " +
                        std::string(dtype_name(spec.dtype)) +
                        "; set components.kv_cache.dtype to " + names);
  }
  const int64_t block = dtype_traits(spec.dtype).block_size;
  if (block > 1 && spec.head_dim > 0 && spec.head_dim % block != 0) {
    s.reasons.push_back("a " + std::string(dtype_name(spec.dtype)) + " KV cache stores blocks of " +
                        std::to_string(block) + " elements, which head_dim " +
                        std::to_string(spec.head_dim) +
                        " does not divide; set components.kv_cache.dtype to f16 or f32");
  }
  if (spec.n_layers <= 0 || spec.n_kv_heads <= 0 || spec.head_dim <= 0 ||
      spec.capacity_tokens <= 0 || spec.block_tokens <= 0 ||
      spec.capacity_tokens % spec.block_tokens != 0) {
    s.reasons.push_back("KV-cache geometry is invalid: capacity " +
                        std::to_string(spec.capacity_tokens) + ", block " +
                        std::to_string(spec.block_tokens) +
                        "; the block size must be positive and divide the capacity");
  }
  return s;
}

}  // namespace duet
