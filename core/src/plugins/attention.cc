#include "duet/attention.h"

#include <string>

namespace duet {

Support check_attention_geometry(const AttentionSpec& spec, const KVCacheSpec& kv,
                                 std::string_view who) {
  Support s;
  if (kv.n_kv_heads != spec.n_kv_heads || kv.head_dim != spec.head_dim) {
    s.reasons.push_back("KV cache holds " + std::to_string(kv.n_kv_heads) + " heads of " +
                        std::to_string(kv.head_dim) + " but " + std::string(who) + " needs " +
                        std::to_string(spec.n_kv_heads) + " heads of " +
                        std::to_string(spec.head_dim));
  }
  if (spec.n_kv_heads <= 0 || spec.n_heads % spec.n_kv_heads != 0) {
    s.reasons.push_back(std::string(who) + ": query heads " + std::to_string(spec.n_heads) +
                        " are not a multiple of KV heads " + std::to_string(spec.n_kv_heads));
  }
  return s;
}

Support check_attention_window(const AttentionSpec& spec, std::string_view who) {
  if (spec.window >= 0) return {};
  return Support::no(std::string(who) + ": a window of " + std::to_string(spec.window) +
                     " positions; a sliding-window layer's window is positive, and 0 means none");
}

}  // namespace duet
