// One source, many test plugins: VARIANT_<name> selects how this library
// deviates from a well-formed plugin (see tests/plugin_host_test.cc).
#include <cstdio>
#include <cstdlib>
#include <new>
#include <stdexcept>

#include "duet/error.h"
#include "duet/plugin.h"

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

// Fails every step with a duet::Error made here, in the plugin: the error
// must stay printable after the host has released the plugin's objects.
class ThrowingSampler final : public duet::Sampler {
 public:
  std::string name() const override { return "test_throw"; }
  void apply(duet::Candidates&, const duet::SamplingContext&) override {
    throw duet::Error(duet::ErrorKind::kInputRejected, "test_throw rejects every step");
  }
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

void register_components(duet::PluginRegistrar& r) {
  r.add_sampler("test_throw", "throws duet::Error from apply()", [](const duet::Options& o) {
    o.finish();
    return std::unique_ptr<duet::Sampler>(new ThrowingSampler);
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
}

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
#else
const char* const kName = "test-plugin";
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
#else
    DUET_ABI_MAJOR, DUET_ABI_MINOR,
#endif
#if defined(VARIANT_bad_toolchain)
    "msvc;msvcprt;c++202002L",
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
    destroy};

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
