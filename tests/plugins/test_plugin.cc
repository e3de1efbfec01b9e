// One source, many test plugins: VARIANT_<name> selects how this library
// deviates from a well-formed plugin (see tests/plugin_host_test.cc).
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <memory>
#include <new>
#include <span>
#include <stdexcept>
#include <vector>

#include "duet/error.h"
#include "duet/host_device.h"
#include "duet/plugin.h"
#include "duet/row_kv_cache.h"
#include "duet/stage.h"

namespace {

// Counts live objects so destroy() can check that they are all gone.
int g_live_objects = 0;

// Picks the first candidate; enough to prove a registered sampler works.
class FirstSampler final : public duet::Sampler {
 public:
  FirstSampler() { ++g_live_objects; }
  ~FirstSampler() override { --g_live_objects; }
  std::string name() const override { return "test_first"; }
  void apply(duet::Candidates& c, const duet::SamplingContext&) override {
    c.selected = c.ids.front();
  }
};

// Fails every step (or, with option from_step N, every step from the
// request's N-th generated token) with a duet::Error made here, in the
// plugin: the error must stay printable after the host has released the
// plugin's objects.
class ThrowingSampler final : public duet::Sampler {
 public:
  explicit ThrowingSampler(int64_t from_step) : from_step_(from_step) {}
  std::string name() const override { return "test_throw"; }
  void apply(duet::Candidates&, const duet::SamplingContext& ctx) override {
    if (from_step_ == 0)
      throw duet::Error(duet::ErrorKind::kInputRejected, "test_throw rejects every step");
    if (static_cast<int64_t>(ctx.step) >= from_step_) {
      throw duet::Error(duet::ErrorKind::kInputRejected,
                        "test_throw rejects step " + std::to_string(ctx.step));
    }
  }

 private:
  int64_t from_step_;
};

// Throws what is not a std::exception from apply(): the host must still
// name it, not terminate.
class IntThrowingSampler final : public duet::Sampler {
 public:
  std::string name() const override { return "test_throw_int_apply"; }
  void apply(duet::Candidates&, const duet::SamplingContext&) override { throw 42; }
};

// A decode stage whose drafter fails with a plain std::runtime_error at its
// first proposal — for every sequence, or (option first_token) only for
// those whose first token is that id.
class ThrowingDrafter final : public duet::SequenceDrafter {
 public:
  explicit ThrowingDrafter(int64_t first_token) : first_token_(first_token) {}
  void propose(std::span<const int32_t> tokens, int32_t, std::vector<int32_t>&) override {
    if (first_token_ < 0 || tokens.front() == first_token_)
      throw std::runtime_error("the stage broke");
  }
  void observe(int32_t, int32_t) override {}

 private:
  int64_t first_token_;
};

class ThrowingStage final : public duet::Stage {
 public:
  explicit ThrowingStage(int64_t first_token) : first_token_(first_token) {}
  std::string name() const override { return "test_throw_stage"; }
  duet::DecodeLimits limits() const override { return {8, {}}; }  // 8 new tokens
  std::unique_ptr<duet::SequenceDrafter> start_sequence() const override {
    return std::make_unique<ThrowingDrafter>(first_token_);
  }

 private:
  int64_t first_token_;
};

// Ends the process the way a crashing or out-of-memory plugin would, for
// the tests of a run that must survive its children failing (duet compare).
class FailingSampler final : public duet::Sampler {
 public:
  explicit FailingSampler(bool abort) : abort_(abort) {}
  std::string name() const override { return abort_ ? "test_abort" : "test_oom"; }
  void apply(duet::Candidates&, const duet::SamplingContext&) override {
    if (abort_) std::abort();
    throw std::bad_alloc();
  }

 private:
  bool abort_;
};

#if defined(VARIANT_extensions)
// The backend's own 'full' attention under another name, reading f32 only
// when `f32_only`: enough to prove that a registered attention runs and
// that its check() reaches `duet validate`.
class DelegatingAttention final : public duet::Attention {
 public:
  DelegatingAttention(std::unique_ptr<duet::Attention> inner, bool f32_only)
      : inner_(std::move(inner)), f32_only_(f32_only) {}
  duet::Support check(const duet::KVCacheSpec& kv) const override {
    duet::Support s = inner_->check(kv);
    if (f32_only_ && kv.dtype != duet::DType::kF32)
      s.reasons.push_back(
          "test_f32_only reads f32 caches only; set components.kv_cache.dtype: f32");
    return s;
  }
  void forward(int32_t layer, const duet::StepBatch& step, const duet::TensorView& q,
               const duet::TensorView& k, const duet::TensorView& v, duet::KVCache& kv,
               duet::TensorView out) override {
    inner_->forward(layer, step, q, k, v, kv, out);
  }

 private:
  std::unique_ptr<duet::Attention> inner_;
  bool f32_only_;
};

// The backend's 'full', then the last row's K and V stored again as zeros:
// right output this step, a wrong cache for every later one — the mistake
// only debug.check_plugins sees at once. Host-memory backends only.
class ForgetfulAttention final : public duet::Attention {
 public:
  explicit ForgetfulAttention(std::unique_ptr<duet::Attention> inner) : inner_(std::move(inner)) {}
  duet::Support check(const duet::KVCacheSpec& kv) const override { return inner_->check(kv); }
  void forward(int32_t layer, const duet::StepBatch& step, const duet::TensorView& q,
               const duet::TensorView& k, const duet::TensorView& v, duet::KVCache& kv,
               duet::TensorView out) override {
    inner_->forward(layer, step, q, k, v, kv, out);
    const int32_t last = step.n_tokens - 1;
    duet::StepBatch one;
    one.n_tokens = 1;
    one.positions = {step.positions[static_cast<size_t>(last)]};
    one.slot_mapping = {step.slot_mapping[static_cast<size_t>(last)]};
    const int64_t width = k.shape.elements() / step.n_tokens;
    zeros_.assign(static_cast<size_t>(width), 0.0f);
    const duet::TensorView zero{zeros_.data(), duet::DType::kF32, duet::Shape{1, width}};
    kv.write(layer, one, zero, zero);
  }

 private:
  std::unique_ptr<duet::Attention> inner_;
  std::vector<float> zeros_;
};

// Fails in forward() with what is not a std::exception: the host must name
// the attention and its plugin, and not terminate.
class IntThrowingAttention final : public duet::Attention {
 public:
  duet::Support check(const duet::KVCacheSpec&) const override { return {}; }
  void forward(int32_t, const duet::StepBatch&, const duet::TensorView&, const duet::TensorView&,
               const duet::TensorView&, duet::KVCache&, duet::TensorView) override {
    throw 7;
  }
};

// Core's slot rows in zeroed memory of the backend's (host) device.
class ZeroedRows final : public duet::RowKVCache {
 public:
  ZeroedRows(const duet::KVCacheSpec& spec, duet::Device& device) : RowKVCache(spec, device) {
    std::memset(storage().data(), 0, storage().size());
  }
};

// ZeroedRows whose export of a range not at slot 0 starts one slot late
// (export_slots, the range from 0, is right): what the conformance kit's
// slot-range case must catch.
class RangeOffByOne final : public duet::RowKVCache {
 public:
  RangeOffByOne(const duet::KVCacheSpec& spec, duet::Device& device) : RowKVCache(spec, device) {
    std::memset(storage().data(), 0, storage().size());
  }
  void export_slot_range(int64_t first_slot, int64_t n_slots,
                         std::vector<uint8_t>& host_out) override {
    RowKVCache::export_slot_range(first_slot > 0 ? first_slot + 1 : 0, n_slots, host_out);
  }
};

// ZeroedRows whose write() throws an int: what core must report naming the
// storage, not abort on.
class ThrowingWrite final : public duet::RowKVCache {
 public:
  ThrowingWrite(const duet::KVCacheSpec& spec, duet::Device& device) : RowKVCache(spec, device) {}
  void write(int32_t, const duet::StepBatch&, const duet::TensorView&,
             const duet::TensorView&) override {
    throw 42;
  }
};

// Registers storage `Rows` (a RowKVCache made from a spec and the backend's
// device) for the reference backend, holding f32, f16 or q8_0 rows.
template <typename Rows>
void add_rows_storage(duet::PluginRegistrar& r, const std::string& name,
                      const std::string& summary) {
  r.add_kv_cache(
      "reference", name, summary,
      [name](duet::Backend&, const duet::KVCacheSpec& spec, const duet::Options& o) {
        o.finish();
        return duet::check_kv_rows(spec, "KV-cache storage '" + name + "'",
                                   {duet::DType::kF32, duet::DType::kF16, duet::DType::kQ8_0});
      },
      [](duet::Backend& backend, const duet::KVCacheSpec& spec, const duet::Options& o) {
        o.finish();
        return std::unique_ptr<duet::KVCache>(new Rows(spec, backend.device()));
      });
}

duet::AttentionFactory delegating(bool f32_only) {
  return
      [f32_only](duet::Backend& backend, const duet::AttentionSpec& spec, const duet::Options& o) {
        o.finish();
        return std::unique_ptr<duet::Attention>(
            new DelegatingAttention(backend.create_attention("full", spec), f32_only));
      };
}

void register_extensions(duet::PluginRegistrar& r) {
  for (const char* backend : {"reference", "onednn"})
    r.add_attention(backend, "test_full", "the backend's 'full' under another name",
                    delegating(false));
  r.add_attention("reference", "test_f32_only", "'full', refusing caches other than f32",
                  delegating(true));
  r.add_attention(
      "reference", "test_forgets_row", "'full', then the last row stored as zeros",
      [](duet::Backend& backend, const duet::AttentionSpec& spec, const duet::Options& o) {
        o.finish();
        return std::unique_ptr<duet::Attention>(
            new ForgetfulAttention(backend.create_attention("full", spec)));
      });
  r.add_attention(
      "reference", "test_no_scale", "'full' without the 1/sqrt(head_dim) scale",
      [](duet::Backend& backend, const duet::AttentionSpec& spec, const duet::Options& o) {
        o.finish();
        duet::AttentionSpec unscaled = spec;
        unscaled.scale = 1.0f;
        return backend.create_attention("full", unscaled);
      });
  r.add_attention("reference", "test_throw_int", "throws an int from forward()",
                  [](duet::Backend&, const duet::AttentionSpec&, const duet::Options& o) {
                    o.finish();
                    return std::unique_ptr<duet::Attention>(new IntThrowingAttention);
                  });
  r.add_attention("nosuch", "test_orphan", "for a backend no plugin provides", delegating(false));
  r.add_attention("test_old", "test_on_old", "for a backend built against ABI 1.0",
                  delegating(false));
  add_rows_storage<ZeroedRows>(r, "test_rows", "core's slot rows, zeroed");
  add_rows_storage<ThrowingWrite>(r, "test_throw_write", "slot rows whose write() throws an int");
  add_rows_storage<RangeOffByOne>(r, "test_range_off_by_one",
                                  "slot rows whose range export starts a slot late");
}
#endif

#if defined(VARIANT_abi_1_0)
// A decode stage of a plugin built against ABI 1.0, whose vtable holds
// Stage::run(Session&) where today's holds limits(): the host must refuse
// it before calling either (here they abort).
class OldDecode final : public duet::Stage {
 public:
  std::string name() const override { return "test_abi_1_0_decode"; }
  duet::DecodeLimits limits() const override { std::abort(); }
  std::unique_ptr<duet::SequenceDrafter> start_sequence() const override { std::abort(); }
};

// What a plugin built against ABI 1.0 could register: a sampler, a stage,
// and a backend (never created here) that extensions may not be paired with.
void register_components(duet::PluginRegistrar& r) {
  r.add_stage("test_abi_1_0_decode", "four tokens, one sequence at a time",
              [](const duet::Options& o) {
                o.finish();
                return std::unique_ptr<duet::Stage>(new OldDecode);
              });
  r.add_sampler("test_abi_1_0", "selects the first candidate", [](const duet::Options& o) {
    o.finish();
    return std::unique_ptr<duet::Sampler>(new FirstSampler);
  });
  r.add_backend("test_old", "never created",
                [](const duet::Options&) -> std::unique_ptr<duet::Backend> {
                  throw duet::Error(duet::ErrorKind::kPlugin, "test_old is never created");
                });
}
#elif defined(VARIANT_extensions)
void register_components(duet::PluginRegistrar& r) { register_extensions(r); }
#elif defined(VARIANT_abi_1_5)
// What a plugin built against ABI 1.5 registers: attentions for a backend
// (the backend's 'full' as it is). Its AttentionSpec had no window, so the
// host must never give it a sliding-window layer.
void register_components(duet::PluginRegistrar& r) {
  r.add_attention(
      "reference", "test_abi_1_5_full", "the backend's 'full', as built against ABI 1.5",
      [](duet::Backend& backend, const duet::AttentionSpec& spec, const duet::Options& o) {
        o.finish();
        return backend.create_attention("full", spec);
      });
  // A copy of its spec, as 1.5's headers made it: 16 bytes, here followed by
  // bytes that read as a window of 3. The backend must not read them.
  r.add_attention(
      "reference", "test_abi_1_5_copied", "'full' of a 1.5-sized copy of the spec",
      [](duet::Backend& backend, const duet::AttentionSpec& spec, const duet::Options& o) {
        o.finish();
        struct Spec15 {
          int32_t n_heads, n_kv_heads, head_dim;
          float scale;
        };
        static_assert(sizeof(Spec15) == 16);
        struct {
          Spec15 copy;
          int32_t after = 3;
        } stack;
        std::memcpy(&stack.copy, &spec, sizeof(Spec15));
        return backend.create_attention("full",
                                        *reinterpret_cast<const duet::AttentionSpec*>(&stack));
      });
}
#elif defined(VARIANT_abi_1_8)
// What a plugin built against ABI 1.8 could register: a backend keeping its
// caches in tiles of 16 slots, whose vtable ends at kv_cache_tile_slots, and
// an attention for it that reads slot rows. The host must refuse to pair them
// and must never ask this backend for rows (here that aborts).
class NoOps final : public duet::Ops {
 public:
  duet::Support supports(const duet::OpDesc&) const override {
    return duet::Support::no("test_tiler runs no ops");
  }
  void embedding(const duet::TensorView&, const duet::TensorView&, duet::TensorView) override {
    std::abort();
  }
  void matmul(const duet::TensorView&, const duet::TensorView&, duet::TensorView) override {
    std::abort();
  }
  void rmsnorm(const duet::TensorView&, const duet::TensorView&, float, duet::TensorView) override {
    std::abort();
  }
  void rope(duet::TensorView, const duet::TensorView&, const duet::RopeParams&) override {
    std::abort();
  }
  void swiglu(const duet::TensorView&, const duet::TensorView&, duet::TensorView) override {
    std::abort();
  }
  void add(const duet::TensorView&, const duet::TensorView&, duet::TensorView) override {
    std::abort();
  }
};

// Core's rows, reported as tiles of 16 slots.
class TiledRows final : public duet::RowKVCache {
 public:
  TiledRows(const duet::KVCacheSpec& spec, duet::Device& device) : RowKVCache(spec, device) {}
  duet::KVLayerView layer(int32_t layer) override {
    duet::KVLayerView view = RowKVCache::layer(layer);
    view.tile_slots = 16;
    return view;
  }
};

class Tiler final : public duet::Backend {
 public:
  std::string name() const override { return "test_tiler"; }
  duet::Device& device() override { return device_; }
  duet::Ops& ops() override { return ops_; }
  std::vector<std::string> attention_impls() const override { return {"own"}; }
  std::unique_ptr<duet::Attention> create_attention(const std::string&,
                                                    const duet::AttentionSpec&) override {
    throw duet::Error(duet::ErrorKind::kConfig, "test_tiler's attention is never created");
  }
  std::vector<std::string> kv_cache_impls() const override { return {"tiles"}; }
  duet::Support check_kv_cache(const duet::KVCacheSpec& spec) const override {
    return duet::check_kv_rows(spec, "test_tiler", {duet::DType::kF16});
  }
  std::unique_ptr<duet::KVCache> create_kv_cache(const duet::KVCacheSpec& spec) override {
    return std::make_unique<TiledRows>(spec, device_);
  }
  int32_t kv_cache_tile_slots(const duet::KVCacheSpec&) const override { return 16; }
  std::unique_ptr<duet::KVCache> create_kv_cache_rows(const duet::KVCacheSpec&) override {
    std::abort();  // past the end of a 1.8 vtable
  }

 private:
  duet::HostDevice device_{"test_tiler", duet::HostMemory::kHeap};
  NoOps ops_;
};

void register_components(duet::PluginRegistrar& r) {
  r.add_backend("test_tiler", "keeps caches in tiles of 16 slots; runs no ops",
                [](const duet::Options& o) -> std::unique_ptr<duet::Backend> {
                  o.finish();
                  return std::make_unique<Tiler>();
                });
  r.add_attention("test_tiler", "test_reads_rows", "reads slot rows; never run",
                  [](duet::Backend&, const duet::AttentionSpec&,
                     const duet::Options&) -> std::unique_ptr<duet::Attention> {
                    throw duet::Error(duet::ErrorKind::kConfig, "test_reads_rows is never run");
                  });
}
#elif defined(VARIANT_clash_builtin)
// A sampler of its own and one named like a built-in plugin's: the built-in
// keeps its name and this plugin is the one refused.
void register_components(duet::PluginRegistrar& r) {
  r.add_sampler("test_clash_own", "selects the first candidate", [](const duet::Options& o) {
    o.finish();
    return std::unique_ptr<duet::Sampler>(new FirstSampler);
  });
  r.add_sampler("greedy", "a second greedy", [](const duet::Options& o) {
    o.finish();
    return std::unique_ptr<duet::Sampler>(new FirstSampler);
  });
}
#else
void register_components(duet::PluginRegistrar& r) {
  r.add_sampler("test_throw", "throws duet::Error from apply()", [](const duet::Options& o) {
    const int64_t from_step = o.get_int("from_step", 0, 0, 1 << 30);
    o.finish();
    return std::unique_ptr<duet::Sampler>(new ThrowingSampler(from_step));
  });
  r.add_sampler("test_first", "selects the first candidate", [](const duet::Options& o) {
    o.finish();
    return std::unique_ptr<duet::Sampler>(new FirstSampler);
  });
#if defined(VARIANT_duplicate_component)
  r.add_sampler("test_first", "the same name again", nullptr);
#endif
  r.add_sampler("test_abort", "aborts the process in apply()", [](const duet::Options& o) {
    o.finish();
    return std::unique_ptr<duet::Sampler>(new FailingSampler(true));
  });
  r.add_sampler("test_oom", "throws std::bad_alloc from apply()", [](const duet::Options& o) {
    o.finish();
    return std::unique_ptr<duet::Sampler>(new FailingSampler(false));
  });
  r.add_sampler("test_throw_int", "its factory throws an int",
                [](const duet::Options&) -> std::unique_ptr<duet::Sampler> { throw 42; });
  r.add_sampler("test_throw_int_apply", "throws an int from apply()", [](const duet::Options& o) {
    o.finish();
    return std::unique_ptr<duet::Sampler>(new IntThrowingSampler);
  });
  r.add_stage("test_throw_stage", "its drafter throws std::runtime_error",
              [](const duet::Options& o) {
                const int64_t first_token = o.get_int("first_token", -1, -1, 1 << 24);
                o.finish();
                return std::unique_ptr<duet::Stage>(new ThrowingStage(first_token));
              });
}
#endif

int probe(char* reason, size_t size) {
#if defined(VARIANT_probe_no)
  std::snprintf(reason, size, "no test device present");
  return 0;
#else
  (void)reason;
  (void)size;
  return 1;
#endif
}

int create(duet::PluginRegistrar* r, char* error, size_t size) {
#if defined(VARIANT_create_throws)
  (void)r, (void)error, (void)size;
  throw std::runtime_error("create exploded");
#elif defined(VARIANT_create_error)
  (void)r;
  std::snprintf(error, size, "license file missing");
  return 3;
#else
  return duet::plugin_detail::guarded_create(register_components, r, error, size);
#endif
}

void destroy() {
  // A plugin's destroy() must only run once its objects are gone.
  if (g_live_objects != 0) std::abort();
}

#if defined(VARIANT_duplicate_name)
const char* const kName = "test-good";
#elif defined(VARIANT_probe_no)
const char* const kName = "test-no-device";  // a backend's choice names it (tests/cli_test.cc)
#elif defined(VARIANT_abi_1_0)
const char* const kName = "test-abi-1-0";
#elif defined(VARIANT_extensions)
const char* const kName = "test-extensions";
#elif defined(VARIANT_abi_1_5)
const char* const kName = "test-abi-1-5";
#elif defined(VARIANT_abi_1_8)
const char* const kName = "test-abi-1-8";
#elif defined(VARIANT_clash_builtin)
const char* const kName = "test-clash-builtin";
#else
const char* const kName = "test-plugin";
#endif

const DuetStructLayout kSdkLayouts[] = DUET_SDK_LAYOUTS;
#if defined(VARIANT_abi_1_5)
// AttentionSpec as ABI 1.5's headers laid it out: four 4-byte fields.
const auto kLayouts = [] {
  std::array<DuetStructLayout, std::size(kSdkLayouts)> all;
  for (size_t i = 0; i < all.size(); ++i) {
    all[i] = kSdkLayouts[i];
    if (std::strcmp(all[i].name, "duet::AttentionSpec") == 0) all[i].size = 16;
  }
  return all;
}();
#elif defined(VARIANT_layout_mismatch)
// Built against a step_batch.h whose StepBatch gained a field, ABI unchanged.
struct GrownStepBatch : duet::StepBatch {
  int64_t added_field;
};
const auto kLayouts = [] {
  std::array<DuetStructLayout, std::size(kSdkLayouts)> all;
  for (size_t i = 0; i < all.size(); ++i) {
    all[i] = kSdkLayouts[i];
    if (std::strcmp(all[i].name, "duet::StepBatch") == 0) {
      all[i].size = sizeof(GrownStepBatch);
      all[i].align = alignof(GrownStepBatch);
    }
  }
  return all;
}();
#else
const auto& kLayouts = kSdkLayouts;
#endif

const DuetPluginDescriptor kDescriptor = {
#if defined(VARIANT_short_descriptor)
    16,
#else
    sizeof(DuetPluginDescriptor),
#endif
#if defined(VARIANT_abi_major)
    DUET_ABI_MAJOR + 1,
    DUET_ABI_MINOR,
#elif defined(VARIANT_abi_minor_newer)
    DUET_ABI_MAJOR,
    DUET_ABI_MINOR + 1,
#elif defined(VARIANT_abi_1_0)
    1,
    0,  // the descriptor is laid out as in 1.0: nothing was appended to it
#elif defined(VARIANT_abi_1_5)
    1,       5,
#elif defined(VARIANT_abi_1_8)
    1,       8,
#else
    DUET_ABI_MAJOR, DUET_ABI_MINOR,
#endif
#if defined(VARIANT_bad_toolchain)
    "msvc;msvcprt;c++202002L",
#elif defined(VARIANT_cxx23)
    "itanium;" DUET_STDLIB_TAG ";c++202302L",  // built with -std=c++23
#else
    DUET_TOOLCHAIN_TAG,
#endif
#if defined(VARIANT_good)
    "test-good",
#else
    kName,
#endif
    "1.2.3",
    "a plugin for the host's tests",
    probe,
    create,
    destroy,
#if defined(VARIANT_abi_1_0)
    nullptr,  // a 1.0 descriptor ends at destroy
    0,
#elif defined(VARIANT_no_layouts)
    nullptr,
    0,
#else
    std::data(kLayouts),
    static_cast<uint32_t>(std::size(kLayouts)),
#endif
};

}  // namespace

#if !defined(VARIANT_no_entry)
extern "C" __attribute__((visibility("default"))) const DuetPluginDescriptor* duet_plugin_entry(
    void) {
  return &kDescriptor;
}
#else
extern "C" __attribute__((visibility("default"))) int some_other_symbol(void) {
  return kDescriptor.abi_major;
}
#endif
