// duet/plugin.h — the boundary between the Duet host and a plugin library.
//
// A plugin is a shared library exporting one C function, duet_plugin_entry(),
// that returns a plain descriptor. The host reads the descriptor before it
// touches any C++ object of the plugin and refuses the library — with the
// reason — unless all of these hold, in this order:
//   1. struct_size covers every field this host reads;
//   2. abi_major equals DUET_ABI_MAJOR and abi_minor is not newer than the
//      host's DUET_ABI_MINOR;
//   3. the toolchain tag equals the host's (C++ objects such as std::string,
//      std::function and vtables cross this boundary, so both sides must
//      share a C++ ABI and standard library ABI);
//   4. (ABI 1.3 and later) every SDK struct has the size and alignment the
//      host's headers give it (DUET_SDK_LAYOUTS): a header that changed
//      without an ABI bump is caught, naming the struct and its header;
//   5. probe() says the plugin can run on this machine.
// Only then does the host call create(), through which the plugin registers
// its components. An accepted library stays mapped until the process exits
// (it is never unloaded: runtimes such as OpenMP do not survive that); its
// destroy() is called once every object it created is gone and its host has
// been destroyed.
//
// Most plugins use DUET_DEFINE_PLUGIN below rather than writing the entry by
// hand. Build them with -fvisibility=hidden; the macro exports the entry. Do
// no CPU-specific work in static initialisers: probe() is where a plugin
// checks the machine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "duet/attention.h"
#include "duet/backend.h"
#include "duet/device.h"
#include "duet/dtype.h"
#include "duet/export.h"
#include "duet/kv_cache.h"
#include "duet/ops.h"
#include "duet/options.h"
#include "duet/sampler.h"
#include "duet/stage.h"
#include "duet/step_batch.h"
#include "duet/support.h"
#include "duet/tensor.h"
#include "duet/tokenizer.h"

#define DUET_ABI_MAJOR 1
#define DUET_ABI_MINOR 9

#define DUET_PLUGIN_STR_(x) #x
#define DUET_PLUGIN_STR(x) DUET_PLUGIN_STR_(x)
#if defined(_LIBCPP_VERSION)
#define DUET_STDLIB_TAG "libc++abi" DUET_PLUGIN_STR(_LIBCPP_ABI_VERSION)
#elif defined(__GLIBCXX__)
#define DUET_STDLIB_TAG "libstdc++cxx11abi" DUET_PLUGIN_STR(_GLIBCXX_USE_CXX11_ABI)
#else
#define DUET_STDLIB_TAG "unknown-stdlib"
#endif
// The C++ ABI, standard library ABI and language standard the including
// translation unit is compiled with, e.g. "itanium;libstdc++cxx11abi1;c++202002L".
// GCC and Clang share the Itanium ABI, so the compiler itself is not part of it.
#define DUET_TOOLCHAIN_TAG "itanium;" DUET_STDLIB_TAG ";c++" DUET_PLUGIN_STR(__cplusplus)

#define DUET_PLUGIN_ENTRY_SYMBOL "duet_plugin_entry"

#define DUET_STRUCT_LAYOUT_(TYPE, HEADER) \
  { #TYPE, HEADER, sizeof(TYPE), alignof(TYPE) }
// The structs plugins and the host pass each other by value or reference,
// as a brace list of DuetStructLayout (the host compares each by name). A
// struct that grew at the end in a later minor version (AttentionSpec in
// 1.6) is compared, for a plugin built before that version, with its size
// then; the host never reads the grown part of such a plugin's structs.
#define DUET_SDK_LAYOUTS                                              \
  {                                                                   \
    DUET_STRUCT_LAYOUT_(duet::AttentionSpec, "duet/attention.h"),     \
        DUET_STRUCT_LAYOUT_(duet::DecodeLimits, "duet/stage.h"),      \
        DUET_STRUCT_LAYOUT_(duet::MemoryInfo, "duet/device.h"),       \
        DUET_STRUCT_LAYOUT_(duet::DTypeTraits, "duet/dtype.h"),       \
        DUET_STRUCT_LAYOUT_(duet::KVCacheSpec, "duet/kv_cache.h"),    \
        DUET_STRUCT_LAYOUT_(duet::KVLayerView, "duet/kv_cache.h"),    \
        DUET_STRUCT_LAYOUT_(duet::OpDesc, "duet/ops.h"),              \
        DUET_STRUCT_LAYOUT_(duet::RopeParams, "duet/ops.h"),          \
        DUET_STRUCT_LAYOUT_(duet::Candidates, "duet/sampler.h"),      \
        DUET_STRUCT_LAYOUT_(duet::SamplingContext, "duet/sampler.h"), \
        DUET_STRUCT_LAYOUT_(duet::SequenceStep, "duet/step_batch.h"), \
        DUET_STRUCT_LAYOUT_(duet::StepBatch, "duet/step_batch.h"),    \
        DUET_STRUCT_LAYOUT_(duet::Support, "duet/support.h"),         \
        DUET_STRUCT_LAYOUT_(duet::Shape, "duet/tensor.h"),            \
        DUET_STRUCT_LAYOUT_(duet::TensorView, "duet/tensor.h")        \
  }

namespace duet {

using BackendFactory = std::function<std::unique_ptr<Backend>(const Options& options)>;
using SamplerFactory = std::function<std::unique_ptr<Sampler>(const Options& options)>;
using StageFactory = std::function<std::unique_ptr<Stage>(const Options& options)>;

// ABI 1.5: a sampler link that reads the vocabulary (a grammar masks tokens
// by their text). `tokenizer` is the pipeline's, and outlives the link; it is
// null when the host only validates `options` (duet validate, a pipeline's
// check), and the factory must then build nothing vocabulary-sized.
using VocabSamplerFactory =
    std::function<std::unique_ptr<Sampler>(const Options& options, const Tokenizer* tokenizer)>;

// ABI 1.1: attention and KV-cache storage for a backend another plugin
// provides. `backend` is the backend a pipeline runs on, created by the
// plugin that registered its name; what the component makes may keep a
// reference to it (the backend outlives every attention and cache of its
// pipeline). `options` are the pipeline's components.attention.options or
// components.kv_cache.options.
using AttentionFactory = std::function<std::unique_ptr<Attention>(
    Backend& backend, const AttentionSpec& spec, const Options& options)>;
// Whether a cache for `spec` can be made with `options`, allocating
// nothing: `duet validate` calls it. spec.impl is the registered name.
using KVCacheCheck =
    std::function<Support(Backend& backend, const KVCacheSpec& spec, const Options& options)>;
using KVCacheFactory = std::function<std::unique_ptr<KVCache>(
    Backend& backend, const KVCacheSpec& spec, const Options& options)>;

// What create() receives: the host's registries. A factory must validate its
// options completely (calling Options::finish()) and throw duet::Error(kConfig)
// naming the key path on any bad value. Factories run on the host's thread.
// Registering a name that is already taken throws duet::Error(kPlugin); the
// host then refuses the whole plugin.
class DUET_API PluginRegistrar {
 public:
  virtual void add_backend(const std::string& name, const std::string& summary,
                           BackendFactory factory) = 0;
  virtual void add_sampler(const std::string& name, const std::string& summary,
                           SamplerFactory factory) = 0;
  virtual void add_stage(const std::string& name, const std::string& summary,
                         StageFactory factory) = 0;

  // ABI 1.1. An attention implementation or KV-cache storage `name` for the
  // backend named `backend` (a backend component, usually another
  // plugin's), chosen in a pipeline by components.attention.impl or
  // components.kv_cache.impl exactly as the backend's own are. The same
  // name may be registered for several backends. Contracts:
  //  - an attention reads slot rows (KVLayerView::tile_slots 0): core
  //    makes its cache with Backend::create_kv_cache_rows (ABI 1.9) and
  //    refuses the pair where a backend built before 1.9 would keep the
  //    cache in its own tiles; its check() says which dtypes it reads;
  //  - a KV-cache storage keeps slot rows in the backend's device memory
  //    (layer() pointers the backend's ops and attention can use), and
  //    write() converts rows as quantize_row() does; duet/row_kv_cache.h
  //    gives all of it but the allocation.
  // Where `backend` is not loaded, or its plugin was built against ABI 1.0
  // (its device lacks copy_on_device, its caches write()), the component is
  // listed as unavailable with that reason and a pipeline naming it is
  // refused with it.
  virtual void add_attention(const std::string& backend, const std::string& name,
                             const std::string& summary, AttentionFactory factory) = 0;
  virtual void add_kv_cache(const std::string& backend, const std::string& name,
                            const std::string& summary, KVCacheCheck check,
                            KVCacheFactory factory) = 0;

  // ABI 1.5. A sampler link made with the pipeline's tokenizer; chosen in a
  // chain, and overridden per request, exactly as add_sampler's links are.
  virtual void add_vocab_sampler(const std::string& name, const std::string& summary,
                                 VocabSamplerFactory factory) = 0;

 protected:
  ~PluginRegistrar() = default;
};

}  // namespace duet

extern "C" {

// One SDK struct as the including translation unit's headers declare it.
struct DuetStructLayout {
  const char* name;    // "duet::StepBatch"
  const char* header;  // "duet/step_batch.h"
  uint32_t size;
  uint32_t align;
};

// The descriptor. New fields are only ever appended (a minor ABI bump);
// struct_size tells the host which ones a plugin has. ABI 1.3 appended
// `layouts` and `n_layouts`.
// ABI 1.1 appended virtual functions to interfaces instead: the registrar's
// add_attention/add_kv_cache, Device::copy_on_device, KVCache::write and
// Backend::kv_cache_tile_slots. A 1.0 plugin never calls the first two, and
// the host calls the others only on objects of plugins built against 1.1 or
// later, so 1.0 plugins keep loading and working. ABI 1.2 appended
// Ops::add_bias, Ops::geglu and Ops::scale, called only on backends of
// plugins built against 1.2 or later; a model that needs them is refused
// on an older backend, naming the op. ABI 1.3 appended Stage::batched();
// ABI 1.7 replaced the stage interface (duet/stage.h: limits() and
// start_sequence(), stepped by the scheduler, instead of Stage::run and
// Stage::batched), so stages of plugins built before 1.7 are refused,
// naming the version they need; their other components still load. ABI 1.4 appended
// KVCache::export_slot_range and import_slot_range, whose base versions (in core) work on any cache
// through export_slots/import_slots; on a cache of an older plugin core
// calls those base versions. ABI 1.5 appended the registrar's
// add_vocab_sampler and Tokenizer::is_control, which only plugins built
// against 1.5 or later call. ABI 1.8 appended Ops::matmuls, called only on
// backends of plugins built against 1.8 or later (older ones get matmul()
// for each matrix). ABI 1.9 appended Backend::create_kv_cache_rows, called
// only on backends of plugins built against 1.9 or later (with older ones
// core refuses to pair a plugin's attention with a cache they would tile).
struct DUET_API DuetPluginDescriptor {
  uint32_t struct_size;   // sizeof(DuetPluginDescriptor) in the plugin
  uint32_t abi_major;     // DUET_ABI_MAJOR the plugin was built with
  uint32_t abi_minor;     // DUET_ABI_MINOR the plugin was built with
  const char* toolchain;  // DUET_TOOLCHAIN_TAG of the plugin
  const char* name;       // unique plugin name, [a-z0-9_-]+
  const char* version;    // the plugin's own version, free-form
  const char* summary;    // one line for `duet plugins`

  // Returns 1 if the plugin can run here. Otherwise returns 0 and writes a
  // NUL-terminated reason ("no CUDA device") of at most reason_size bytes.
  // Must not throw. May be null, meaning "always runs".
  int (*probe)(char* reason, size_t reason_size);

  // Registers the plugin's components. Returns 0 on success; otherwise
  // writes a NUL-terminated message of at most error_size bytes and returns
  // non-zero. Called at most once per load.
  int (*create)(duet::PluginRegistrar* registrar, char* error, size_t error_size);

  // Called once before the library is unloaded, after every object it
  // created has been destroyed. May be null.
  void (*destroy)(void);

  // ABI 1.3, appended: the SDK's structs as the plugin's headers declared
  // them (DUET_SDK_LAYOUTS, which DUET_DEFINE_PLUGIN fills in). The host
  // refuses a 1.3+ plugin whose list is missing or differs from its own.
  // A field added, removed or resized shows; two same-size fields swapped
  // do not.
  const DuetStructLayout* layouts;
  uint32_t n_layouts;
};

typedef const DuetPluginDescriptor* (*DuetPluginEntryFn)(void);

}  // extern "C"

namespace duet::plugin_detail {
// Runs `fn(registrar)` and turns an exception into create()'s error return.
DUET_API int guarded_create(void (*fn)(PluginRegistrar&), PluginRegistrar* registrar, char* error,
                            size_t error_size) noexcept;
}  // namespace duet::plugin_detail

// Defines duet_plugin_entry() for a plugin. REGISTER_FN is
// `void fn(duet::PluginRegistrar&)` and may throw; PROBE_FN is a probe as in
// the descriptor, or nullptr.
#define DUET_DEFINE_PLUGIN(NAME, VERSION, SUMMARY, PROBE_FN, REGISTER_FN)                          \
  namespace {                                                                                      \
  int duet_plugin_create_(duet::PluginRegistrar* r, char* e, size_t n) {                           \
    return duet::plugin_detail::guarded_create(REGISTER_FN, r, e, n);                              \
  }                                                                                                \
  const DuetStructLayout duet_plugin_layouts_[] = DUET_SDK_LAYOUTS;                                \
  const DuetPluginDescriptor duet_plugin_descriptor_ = {                                           \
      sizeof(DuetPluginDescriptor),                                                                \
      DUET_ABI_MAJOR,                                                                              \
      DUET_ABI_MINOR,                                                                              \
      DUET_TOOLCHAIN_TAG,                                                                          \
      NAME,                                                                                        \
      VERSION,                                                                                     \
      SUMMARY,                                                                                     \
      PROBE_FN,                                                                                    \
      duet_plugin_create_,                                                                         \
      nullptr,                                                                                     \
      duet_plugin_layouts_,                                                                        \
      sizeof(duet_plugin_layouts_) / sizeof(duet_plugin_layouts_[0])};                             \
  }                                                                                                \
  extern "C" __attribute__((visibility("default"))) const DuetPluginDescriptor* duet_plugin_entry( \
      void) {                                                                                      \
    return &duet_plugin_descriptor_;                                                               \
  }
