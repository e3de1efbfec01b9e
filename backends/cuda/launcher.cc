#include "launcher.h"

#include <type_traits>

#include "cuda_error.h"

namespace duet::cuda {

void Launcher::run(const Command& command) {
  std::visit(
      [&](const auto& c) {
        using T = std::decay_t<decltype(c)>;
        if constexpr (std::is_same_v<T, EmbeddingCall>) {
          check_cuda(launch_embedding(at_, c.table, c.dtype, c.dim, c.ids, c.n, c.out),
                     "launching embedding");
        } else if constexpr (std::is_same_v<T, GemvCall>) {
          check_cuda(launch_gemv(at_, c.x, c.cols, c.x_rows, c.dtype, c.segments, c.count),
                     "launching gemv");
        } else if constexpr (std::is_same_v<T, GemvSwiGLUCall>) {
          check_cuda(launch_gemv_swiglu(at_, c.x, c.cols, c.x_rows, c.dtype, c.w_gate, c.w_up,
                                        c.rows, c.gate, c.up, c.into_gate),
                     "launching gemv + swiglu");
        } else if constexpr (std::is_same_v<T, GemmCall>) {
          gemm_.run(c, at_);
        } else if constexpr (std::is_same_v<T, RmsNormCall>) {
          check_cuda(launch_rmsnorm(at_, c.x, c.weight, c.eps, c.rows, c.dim, c.out),
                     "launching rmsnorm");
        } else if constexpr (std::is_same_v<T, AddRmsNormCall>) {
          check_cuda(
              launch_add_rmsnorm(at_, c.a, c.b, c.sum, c.weight, c.eps, c.rows, c.dim, c.out),
              "launching add + rmsnorm");
        } else if constexpr (std::is_same_v<T, RopeCall>) {
          check_cuda(launch_rope(at_, c.first, c.second, c.positions, c.rows, c.head_dim,
                                 c.theta_base, c.halves, c.freq_factors),
                     "launching rope");
        } else if constexpr (std::is_same_v<T, SwiGLUCall>) {
          check_cuda(launch_swiglu(at_, c.gate, c.up, c.n, c.out), "launching swiglu");
        } else if constexpr (std::is_same_v<T, AddCall>) {
          check_cuda(launch_add(at_, c.a, c.b, c.n, c.out), "launching add");
        } else if constexpr (std::is_same_v<T, AddBiasCall>) {
          check_cuda(launch_add_bias(at_, c.x, c.bias, c.rows, c.dim, c.out), "launching add_bias");
        } else if constexpr (std::is_same_v<T, GeGLUCall>) {
          check_cuda(launch_geglu(at_, c.gate, c.up, c.n, c.out), "launching geglu");
        } else if constexpr (std::is_same_v<T, ScaleCall>) {
          check_cuda(launch_scale(at_, c.x, c.factor, c.n, c.out), "launching scale");
        } else if constexpr (std::is_same_v<T, KvStoreCall>) {
          check_cuda(launch_kv_store(at_, c.store), "launching the KV-cache store");
        } else {
          static_assert(std::is_same_v<T, AttentionCall>);
          check_cuda(launch_kv_store(at_, c.store), "launching the KV-cache store");
          check_cuda(launch_attention(at_, c.attend), "launching attention");
        }
      },
      command);
}

}  // namespace duet::cuda
