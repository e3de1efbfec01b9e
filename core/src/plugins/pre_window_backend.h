// pre_window_backend.h — a backend as an attention plugin built before ABI
// 1.6 is handed it (internal to core).
//
// Such a plugin's AttentionSpec ends before `window` (16 bytes): a spec it
// builds itself — a copy of the one it was given, with its own scale, say —
// and passes to backend.create_attention() has no window behind it, and the
// backend, built against 1.6 or later, would read 4 bytes past its end. This
// backend takes create_attention()'s spec up to `window` only, with no window
// (the host never gives such a plugin a windowed layer), and forwards every
// other call to the backend itself. It lives as long as the attention made
// with it.
#pragma once

#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "duet/attention.h"
#include "duet/backend.h"

namespace duet {

class PreWindowBackend final : public Backend {
 public:
  explicit PreWindowBackend(Backend& backend) : backend_(backend) {}

  std::string name() const override { return backend_.name(); }
  Device& device() override { return backend_.device(); }
  Ops& ops() override { return backend_.ops(); }
  std::vector<std::string> attention_impls() const override { return backend_.attention_impls(); }
  std::unique_ptr<Attention> create_attention(const std::string& impl,
                                              const AttentionSpec& spec) override {
    AttentionSpec whole;  // window 0
    std::memcpy(static_cast<void*>(&whole), &spec, offsetof(AttentionSpec, window));
    return backend_.create_attention(impl, whole);
  }
  std::vector<std::string> kv_cache_impls() const override { return backend_.kv_cache_impls(); }
  Support check_kv_cache(const KVCacheSpec& spec) const override {
    return backend_.check_kv_cache(spec);
  }
  void begin_forward(const StepBatch& step) override { backend_.begin_forward(step); }
  void end_forward() override { backend_.end_forward(); }
  std::unique_ptr<KVCache> create_kv_cache(const KVCacheSpec& spec) override {
    return backend_.create_kv_cache(spec);
  }
  // Extensions are paired only with backends built against 1.1 or later,
  // which have this function.
  int32_t kv_cache_tile_slots(const KVCacheSpec& spec) const override {
    return backend_.kv_cache_tile_slots(spec);
  }

 private:
  Backend& backend_;
};

}  // namespace duet
