#include "cuda_backend.h"

#include <cstdio>

#include "cuda_attention.h"
#include "cuda_kv_cache.h"
#include "duet/error.h"

namespace duet::cuda {

CudaBackend::CudaBackend(const CudaOptions& options)
    : options_(options),
      device_(options.device),
      pass_(device_, options.cuda_graphs, options.pdl, options.fuse),
      ops_(pass_, options.matmul_min_rows) {
  device_.set_before_transfer([this] { pass_.flush(); });
}

CudaBackend::~CudaBackend() {
  device_.set_before_transfer(nullptr);
  if (options_.graph_stats) {
    const PassCounts& c = pass_.counts();
    std::fprintf(
        stderr,
        "cuda: %lld forward passes ran eagerly, %lld were captured, %lld replayed a graph\n",
        static_cast<long long>(c.eager), static_cast<long long>(c.captured),
        static_cast<long long>(c.replayed));
  }
}

std::unique_ptr<Attention> CudaBackend::create_attention(const std::string& impl,
                                                         const AttentionSpec& spec) {
  if (impl != "full") {
    throw Error(ErrorKind::kConfig, "backend 'cuda' provides no attention implementation named '" +
                                        impl + "'; available: 'full'");
  }
  return std::make_unique<CudaAttention>(spec, pass_, device_, options_.fuse,
                                         options_.split_attention, options_.tiled_attention,
                                         options_.batch_invariant);
}

Support CudaBackend::check_kv_cache(const KVCacheSpec& spec) const {
  return CudaKVCache::check(spec);
}

std::unique_ptr<KVCache> CudaBackend::create_kv_cache(const KVCacheSpec& spec) {
  Support s = CudaKVCache::check(spec);
  if (!s.ok()) throw Error(ErrorKind::kConfig, s.reasons.front());
  return std::make_unique<CudaKVCache>(spec, device_, pass_);
}

}  // namespace duet::cuda
