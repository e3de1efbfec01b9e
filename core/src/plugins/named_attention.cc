#include "plugins/named_attention.h"

#include <new>

#include "duet/error.h"

namespace duet {
namespace {

// Runs `call`, turning what it throws into an Error that starts with `label`.
template <typename Call>
auto named(const std::string& label, Call&& call) {
  try {
    return call();
  } catch (const Error& e) {
    throw Error(e.kind(), label + ": " + e.what());
  } catch (const std::bad_alloc&) {
    throw;  // out of memory, not a broken plugin: exit code 5
  } catch (const std::exception& e) {
    throw Error(ErrorKind::kPlugin, label + " failed: " + e.what());
  } catch (...) {
    throw Error(ErrorKind::kPlugin,
                label + " failed: it threw something that is not a std::exception");
  }
}

}  // namespace

Support NamedAttention::check(const KVCacheSpec& kv) const {
  return named(label_, [&] { return inner_->check(kv); });
}

void NamedAttention::forward(int32_t layer, const StepBatch& step, const TensorView& q,
                             const TensorView& k, const TensorView& v, KVCache& kv,
                             TensorView out) {
  named(label_, [&] { inner_->forward(layer, step, q, k, v, kv, out); });
}

}  // namespace duet
