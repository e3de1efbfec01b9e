#include "duet/app/plugin_host.h"

#include <dlfcn.h>

#include <algorithm>
#include <boost/dll/runtime_symbol_info.hpp>
#include <boost/dll/shared_library.hpp>
#include <cctype>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <set>
#include <utility>

#include "duet/app/suggest.h"
#include "duet/error.h"
#include "engine/stage_options.h"
#include "plugins/pre_window_backend.h"
#include "text/split.h"

namespace duet {

namespace fs = std::filesystem;

const char* component_kind_name(ComponentKind kind) {
  switch (kind) {
    case ComponentKind::kBackend:
      return "backend";
    case ComponentKind::kSampler:
      return "sampler";
    case ComponentKind::kStage:
      return "stage";
    case ComponentKind::kAttention:
      return "attention";
    case ComponentKind::kKVCache:
      return "KV-cache storage";
  }
  return "component";
}

bool is_plugin_file_name(const std::string& file_name) {
  return file_name.size() > 8 && file_name.rfind("duet-", 0) == 0 &&
         file_name.compare(file_name.size() - 3, 3, ".so") == 0;
}

namespace {

// Duet's own plugin folders, as plugin_search_dirs ends with them. libduet.so
// sits in <prefix>/<libdir> when installed and in <build>/core in the build
// tree, where the build's plugins are searched too; so are they for the
// white-box tests in <build>/tests, which link core statically.
std::vector<fs::path> own_plugin_dirs() {
  std::vector<fs::path> dirs;
  std::error_code ec;
  const fs::path lib_dir =
      fs::weakly_canonical(fs::path(boost::dll::this_line_location().string()).parent_path(), ec);
  dirs.push_back(lib_dir / "duet" / "plugins");
  const fs::path build_root =
      fs::weakly_canonical(fs::path(DUET_BUILD_PLUGIN_DIR).parent_path(), ec);
  for (const char* part : {"core", "tests"}) {
    if (fs::equivalent(lib_dir, build_root / part, ec)) dirs.push_back(DUET_BUILD_PLUGIN_DIR);
  }
  return dirs;
}

bool is_own_plugin_dir(const fs::path& dir) {
  for (const fs::path& own : own_plugin_dirs()) {
    std::error_code ec;
    if (fs::equivalent(dir, own, ec)) return true;
  }
  return false;
}

}  // namespace

std::vector<fs::path> plugin_search_dirs(const std::vector<std::string>& config_paths,
                                         const fs::path& config_dir) {
  std::vector<fs::path> dirs;
  auto add = [&dirs](const fs::path& p) {
    std::error_code ec;
    if (p.empty() || !fs::is_directory(p, ec)) return;
    fs::path canonical = fs::weakly_canonical(p, ec);
    if (std::find(dirs.begin(), dirs.end(), canonical) == dirs.end()) dirs.push_back(canonical);
  };
  for (size_t i = 0; i < config_paths.size(); ++i) {
    const fs::path p = fs::path(config_paths[i]).is_absolute() ? fs::path(config_paths[i])
                                                               : config_dir / config_paths[i];
    std::error_code ec;
    if (!fs::is_directory(p, ec)) {
      const std::string resolved = p.lexically_normal().string();
      throw Error(ErrorKind::kConfig,
                  "plugins.paths[" + std::to_string(i) + "]: '" + config_paths[i] + "'" +
                      (resolved == config_paths[i] ? "" : " (" + resolved + ")") +
                      " is not a folder; fix the path or remove it from the list");
    }
    add(p);
  }
  if (const char* env = std::getenv("DUET_PLUGIN_PATH")) {
    for (const std::string& entry : split(env, ':')) add(entry);
  }
  for (const fs::path& own : own_plugin_dirs()) add(own);
  return dirs;
}

std::vector<std::string> plugin_path_warnings() {
  std::vector<std::string> warnings;
  const char* env = std::getenv("DUET_PLUGIN_PATH");
  if (env == nullptr) return warnings;
  for (const std::string& entry : split(env, ':')) {
    std::error_code ec;
    if (!entry.empty() && !fs::is_directory(entry, ec)) {
      warnings.push_back("DUET_PLUGIN_PATH names '" + entry +
                         "', which is not a folder; it is skipped");
    }
  }
  return warnings;
}

namespace {

// "c++202302L" as the flag that gives it: "-std=c++23 (__cplusplus
// 202302L)".
std::string standard_name(const std::string& part) {
  static const std::pair<const char*, const char*> kKnown[] = {
      {"c++201703L", "c++17"}, {"c++202002L", "c++20"}, {"c++202302L", "c++23"}};
  for (const auto& [value, name] : kKnown) {
    if (part == value) return std::string("-std=") + name + " (__cplusplus " + (value + 3) + ")";
  }
  return "'" + part + "'";
}

// The refusal of a plugin whose toolchain tag ("ABI;stdlib;c++VERSION") is
// not the host's: only the language standard differing is a flag to change,
// anything else a compiler or standard library.
std::string toolchain_refusal(const std::string& tag) {
  const std::vector<std::string> plugin = split(tag, ';'), host = split(DUET_TOOLCHAIN_TAG, ';');
  if (plugin.size() == 3 && host.size() == 3 && plugin[0] == host[0] && plugin[1] == host[1]) {
    return "toolchain mismatch: plugin built with " + standard_name(plugin[2]) + ", host with " +
           standard_name(host[2]) +
           " (same compiler ABI and standard library); build the plugin with the host's "
           "standard (CMAKE_CXX_STANDARD 20, as duet_add_plugin sets it)";
  }
  return "toolchain mismatch: plugin built with '" + tag +
         "', host with '" DUET_TOOLCHAIN_TAG
         "'; rebuild the plugin with a compatible compiler and standard library";
}

}  // namespace

// A loaded library and its descriptor. Unloading calls destroy() first.
class DUET_LOCAL PluginHost::Library {
 public:
  Library(boost::dll::shared_library lib, const DuetPluginDescriptor* desc)
      : lib_(std::move(lib)), desc_(desc) {}
  ~Library() {
    // A destructor must not throw; a plugin whose destroy() does is ignored.
    try {
      if (created_ && desc_->destroy) desc_->destroy();
    } catch (...) {
    }
  }
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;

  const DuetPluginDescriptor& desc() const { return *desc_; }
  void mark_created() { created_ = true; }

 private:
  boost::dll::shared_library lib_;
  const DuetPluginDescriptor* desc_;
  bool created_ = false;
};

// Collects what one plugin registers; the host commits it only if create()
// succeeds, so a failing plugin leaves no half-registered components.
class DUET_LOCAL PluginHost::Registrar final : public PluginRegistrar {
 public:
  Registrar(const PluginHost& host, std::shared_ptr<Library> library, std::string plugin)
      : host_(host), library_(std::move(library)), plugin_(std::move(plugin)) {}

  void add_backend(const std::string& name, const std::string& summary,
                   BackendFactory factory) override {
    stage(ComponentKind::kBackend, name, summary).backend = std::move(factory);
  }
  void add_sampler(const std::string& name, const std::string& summary,
                   SamplerFactory factory) override {
    stage(ComponentKind::kSampler, name, summary).sampler = std::move(factory);
  }
  void add_vocab_sampler(const std::string& name, const std::string& summary,
                         VocabSamplerFactory factory) override {
    stage(ComponentKind::kSampler, name, summary).vocab_sampler = std::move(factory);
  }
  void add_stage(const std::string& name, const std::string& summary,
                 StageFactory factory) override {
    stage(ComponentKind::kStage, name, summary).stage = std::move(factory);
  }
  void add_attention(const std::string& backend, const std::string& name,
                     const std::string& summary, AttentionFactory factory) override {
    stage(ComponentKind::kAttention, name, summary, backend).attention = std::move(factory);
  }
  void add_kv_cache(const std::string& backend, const std::string& name, const std::string& summary,
                    KVCacheCheck check, KVCacheFactory factory) override {
    Entry& e = stage(ComponentKind::kKVCache, name, summary, backend);
    e.kv_check = std::move(check);
    e.kv_cache = std::move(factory);
  }

  std::vector<Entry>& staged() { return staged_; }

 private:
  Entry& stage(ComponentKind kind, const std::string& name, const std::string& summary,
               const std::string& backend = {}) {
    const bool extension = kind == ComponentKind::kAttention || kind == ComponentKind::kKVCache;
    const std::string what = std::string(component_kind_name(kind)) + " '" + name + "'" +
                             (extension ? " for backend '" + backend + "'" : "");
    if (name.empty()) {
      throw Error(ErrorKind::kPlugin,
                  std::string("a ") + component_kind_name(kind) + " needs a name");
    }
    if (extension && backend.empty()) throw Error(ErrorKind::kPlugin, what + " names no backend");
    if (kind == ComponentKind::kStage && is_builtin_stage(name)) {
      throw Error(ErrorKind::kPlugin,
                  "stage '" + name + "' is built into Duet's core; choose another name");
    }
    const Key key{kind, backend, name};
    if (auto it = host_.entries_.find(key); it != host_.entries_.end()) {
      throw Error(ErrorKind::kPlugin,
                  what + " is already registered by plugin '" + it->second.info.plugin + "'");
    }
    for (const auto& e : staged_) {
      if (Key{e.info.kind, e.info.backend, e.info.name} == key)
        throw Error(ErrorKind::kPlugin, what + " registered twice");
    }
    Entry entry;
    entry.info = ComponentInfo{kind, name, summary, plugin_, backend};
    entry.library = library_;
    entry.abi_minor = library_->desc().abi_minor;
    staged_.push_back(std::move(entry));
    return staged_.back();
  }

  const PluginHost& host_;
  std::shared_ptr<Library> library_;
  std::string plugin_;
  std::vector<Entry> staged_;
};

PluginHost::PluginHost() = default;
PluginHost::~PluginHost() = default;

namespace {

// The descriptor fields this host reads end with `destroy`.
constexpr size_t kDescriptorBytes = offsetof(DuetPluginDescriptor, destroy) + sizeof(void (*)());

// Why a plugin built against ABI 1.3 or later cannot be trusted with the
// SDK's structs: a layout list missing, or one struct whose size or
// alignment is not this host's; empty when every struct matches.
std::string layout_refusal(const DuetPluginDescriptor& d) {
  constexpr size_t kLayoutBytes = offsetof(DuetPluginDescriptor, n_layouts) + sizeof(uint32_t);
  constexpr uint32_t kMostLayouts = 4096;  // a bound for a corrupt count
  const std::string rebuild =
      ": the plugin was built against other Duet headers of the same ABI "
      "version; rebuild it against this Duet SDK's headers";
  if (d.struct_size < kLayoutBytes || d.layouts == nullptr || d.n_layouts == 0 ||
      d.n_layouts > kMostLayouts) {
    return "its descriptor (ABI " + std::to_string(d.abi_major) + "." +
           std::to_string(d.abi_minor) +
           ") lists no SDK struct layouts; define it with DUET_DEFINE_PLUGIN, or fill `layouts` "
           "with DUET_SDK_LAYOUTS (duet/plugin.h)";
  }
  static const DuetStructLayout kHost[] = DUET_SDK_LAYOUTS;
  // Structs grown at their end: in a plugin built before `minor`, a struct
  // has its size of then (the host passes it, and reads only that part).
  struct Growth {
    const char* name;
    uint32_t minor;
    uint32_t size_before;
  };
  static constexpr Growth kGrowth[] = {{"duet::AttentionSpec", 6, 16}};
  static_assert(offsetof(AttentionSpec, window) == 16, "AttentionSpec's 1.5 fields are 16 bytes");
  for (DuetStructLayout h : kHost) {
    for (const Growth& g : kGrowth) {
      if (d.abi_minor < g.minor && std::strcmp(g.name, h.name) == 0) h.size = g.size_before;
    }
    const DuetStructLayout* mine = nullptr;
    for (uint32_t i = 0; i < d.n_layouts; ++i) {
      if (d.layouts[i].name != nullptr && std::strcmp(d.layouts[i].name, h.name) == 0)
        mine = &d.layouts[i];
    }
    if (mine == nullptr) {
      return std::string("struct ") + h.name + " (" + h.header + ") is not in its layouts" +
             rebuild;
    }
    if (mine->size != h.size || mine->align != h.align) {
      return std::string("struct ") + h.name + " (" + h.header + ") is " +
             std::to_string(mine->size) + " bytes, aligned to " + std::to_string(mine->align) +
             ", in the plugin and " + std::to_string(h.size) + ", aligned to " +
             std::to_string(h.align) + ", in this host" + rebuild;
    }
  }
  return "";
}

bool valid_plugin_name(const char* name) {
  if (name == nullptr || *name == '\0' || std::strlen(name) > 64) return false;
  for (const char* c = name; *c; ++c) {
    bool ok = std::islower(static_cast<unsigned char>(*c)) ||
              std::isdigit(static_cast<unsigned char>(*c)) || *c == '_' || *c == '-';
    if (!ok) return false;
  }
  return true;
}

std::string text_or(const char* s, const char* fallback) { return s ? std::string(s) : fallback; }

}  // namespace

PluginRecord PluginHost::load(const fs::path& file) {
  // A file is tried once per host: pipelines load the same folders again
  // and again, and re-opening a library each time costs memory and time.
  std::error_code ec;
  for (const auto& r : records_) {
    if (r.path == file || fs::equivalent(r.path, file, ec)) return r;
  }
  records_.push_back(PluginRecord{file, file.filename().string(), "", "", false, "", {}});
  PluginRecord& record = records_.back();
  auto refuse = [&record](std::string why) -> PluginRecord {
    record.refusal = std::move(why);
    return record;
  };

  if (!fs::exists(file, ec)) return refuse("file not found");
  if (!fs::is_regular_file(file, ec)) return refuse("not a regular file");

  boost::dll::shared_library lib;
  try {
    // RTLD_NOW surfaces unresolved symbols here instead of as a crash later;
    // RTLD_LOCAL keeps one plugin's symbols from satisfying another's.
    lib.load(file.string(), boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
  } catch (const std::exception& e) {
    return refuse(std::string("not a loadable shared library: ") + e.what());
  }
  if (!lib.has(DUET_PLUGIN_ENTRY_SYMBOL)) {
    return refuse("no " DUET_PLUGIN_ENTRY_SYMBOL "() symbol: not a Duet plugin");
  }
  const DuetPluginDescriptor* desc = nullptr;
  try {
    desc = lib.get<const DuetPluginDescriptor*()>(DUET_PLUGIN_ENTRY_SYMBOL)();
  } catch (...) {
    return refuse(DUET_PLUGIN_ENTRY_SYMBOL "() threw an exception");
  }
  if (desc == nullptr) return refuse(DUET_PLUGIN_ENTRY_SYMBOL "() returned no descriptor");

  // Only plain fields are read until every check below has passed.
  if (desc->struct_size < kDescriptorBytes) {
    return refuse("descriptor is " + std::to_string(desc->struct_size) +
                  " bytes; this host needs at least " + std::to_string(kDescriptorBytes) +
                  " (plugin built for an older Duet ABI)");
  }
  if (valid_plugin_name(desc->name)) record.name = desc->name;
  record.version = text_or(desc->version, "");
  record.summary = text_or(desc->summary, "");
  const std::string host_abi =
      std::to_string(DUET_ABI_MAJOR) + "." + std::to_string(DUET_ABI_MINOR);
  const std::string plugin_abi =
      std::to_string(desc->abi_major) + "." + std::to_string(desc->abi_minor);
  if (desc->abi_major != DUET_ABI_MAJOR) {
    return refuse("ABI major version mismatch: plugin " + plugin_abi + ", host " + host_abi +
                  "; rebuild the plugin against this Duet SDK");
  }
  if (desc->abi_minor > DUET_ABI_MINOR) {
    return refuse("plugin needs ABI " + plugin_abi + " but this host provides " + host_abi +
                  "; upgrade Duet or rebuild the plugin against this SDK");
  }
  const std::string tag = text_or(desc->toolchain, "(none)");
  if (tag != DUET_TOOLCHAIN_TAG) return refuse(toolchain_refusal(tag));
  if (desc->abi_minor >= 3) {
    if (std::string why = layout_refusal(*desc); !why.empty()) return refuse(why);
  }
  if (!valid_plugin_name(desc->name)) {
    return refuse("invalid plugin name '" + text_or(desc->name, "(null)") +
                  "'; expected [a-z0-9_-]{1,64}");
  }
  if (desc->create == nullptr) return refuse("descriptor has no create()");
  for (const auto& other : records_) {
    if (&other != &record && other.loaded && other.name == record.name) {
      return refuse("a plugin named '" + record.name + "' is already loaded from " +
                    other.path.string() + " (the first one found wins)");
    }
  }
  if (desc->probe != nullptr) {
    char reason[512] = {};
    int can_run = 0;
    try {
      can_run = desc->probe(reason, sizeof reason);
    } catch (...) {
      return refuse("probe() threw an exception; it must report problems by returning 0");
    }
    if (can_run == 0) {
      reason[sizeof reason - 1] = '\0';
      return refuse(std::string("cannot run here: ") +
                    (reason[0] ? reason : "the probe gave no reason"));
    }
  }

  // An accepted library is never unmapped (RTLD_NODELETE): runtimes it pulls
  // in (OpenMP, oneDNN) do not survive being unloaded, and an exception made
  // by its code may outlive every object it created. Refused ones still go.
  if (dlopen(file.c_str(), RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE) == nullptr) {
    return refuse(std::string("could not pin the library in memory: ") + dlerror());
  }
  auto library = std::make_shared<Library>(std::move(lib), desc);
  Registrar registrar(*this, library, record.name);
  char error[512] = {};
  int status = 1;
  library->mark_created();
  try {
    status = desc->create(&registrar, error, sizeof error);
  } catch (const std::exception& e) {
    std::snprintf(error, sizeof error, "%s", e.what());
  } catch (...) {
    std::snprintf(error, sizeof error, "unknown exception");
  }
  if (status != 0) {
    error[sizeof error - 1] = '\0';
    return refuse(std::string("create() failed: ") + (error[0] ? error : "no message"));
  }

  for (auto& entry : registrar.staged()) {
    record.components.push_back(entry.info);
    Key key{entry.info.kind, entry.info.backend, entry.info.name};
    entries_.emplace(std::move(key), std::move(entry));
  }
  record.loaded = true;
  libraries_.push_back(std::move(library));
  return record;
}

void PluginHost::load_dirs(const std::vector<fs::path>& dirs) {
  // Duet's own plugins load first, so that a third party's plugin that
  // registers one of their component names (a second `greedy`) is the one
  // refused, not the built-in one with everything else it provides. An own
  // file whose name a folder earlier in the search order also has keeps its
  // place after it: that earlier file replaces it on purpose (the first
  // plugin of a name wins).
  std::vector<fs::path> first;
  std::vector<fs::path> in_order;
  std::set<fs::path> names;
  for (const auto& dir : dirs) {
    std::vector<fs::path> files;
    std::vector<fs::path> others;
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      std::error_code type_ec;
      if (it->is_directory(type_ec)) continue;  // folders are not searched inside
      (is_plugin_file_name(it->path().filename().string()) ? files : others).push_back(it->path());
    }
    // Each noted once per host, as each plugin file is tried once: a host
    // that scans the same folders for every pipeline does not grow.
    auto skip = [this](const fs::path& path, std::string reason) {
      for (const SkippedFile& s : skipped_) {
        if (s.path == path) return;
      }
      skipped_.push_back({path, std::move(reason)});
    };
    if (ec) skip(dir, "the folder could not be read to the end: " + ec.message());
    std::sort(files.begin(), files.end());
    std::sort(others.begin(), others.end());
    for (const auto& f : others)
      skip(f, "not named duet-<name>.so, the name a plugin file must have");
    const bool own = is_own_plugin_dir(dir);
    for (const auto& f : files) {
      (own && names.count(f.filename()) == 0 ? first : in_order).push_back(f);
      names.insert(f.filename());
    }
  }
  for (const auto& f : first) load(f);
  for (const auto& f : in_order) load(f);
}

std::vector<ComponentInfo> PluginHost::components(ComponentKind kind) const {
  std::vector<ComponentInfo> out;
  for (const auto& [key, entry] : entries_) {
    if (std::get<0>(key) == kind) out.push_back(entry.info);
  }
  return out;
}

bool PluginHost::has(ComponentKind kind, const std::string& name) const {
  return entries_.count({kind, "", name}) != 0;
}

std::vector<ComponentInfo> PluginHost::extensions(ComponentKind kind,
                                                  const std::string& backend) const {
  std::vector<ComponentInfo> out;
  for (const auto& [key, entry] : entries_) {
    if (std::get<0>(key) == kind && std::get<1>(key) == backend) out.push_back(entry.info);
  }
  return out;
}

uint32_t PluginHost::backend_abi_minor(const std::string& name) const {
  return abi_minor(ComponentKind::kBackend, name);
}

bool PluginHost::backend_makes_kv_rows(const std::string& name) const {
  constexpr uint32_t kRowsAbi = 9;  // Backend::create_kv_cache_rows
  return backend_abi_minor(name) >= kRowsAbi;
}

uint32_t PluginHost::abi_minor(ComponentKind kind, const std::string& name) const {
  return find(kind, name).abi_minor;
}

uint32_t PluginHost::extension_abi_minor(ComponentKind kind, const std::string& backend,
                                         const std::string& name) const {
  return find_extension(kind, backend, name).abi_minor;
}

std::string PluginHost::unavailable_reason(const ComponentInfo& info) const {
  if (info.backend.empty()) return "";
  auto it = entries_.find({ComponentKind::kBackend, "", info.backend});
  if (it == entries_.end()) {
    std::vector<std::string> loaded;
    for (const auto& b : components(ComponentKind::kBackend)) loaded.push_back(b.name);
    return "backend '" + info.backend + "' is not loaded (loaded backends: " + quoted_list(loaded) +
           ")";
  }
  if (it->second.abi_minor < 1) {
    return "backend '" + info.backend + "' (plugin '" + it->second.info.plugin +
           "') was built against Duet ABI " + std::to_string(DUET_ABI_MAJOR) + "." +
           std::to_string(it->second.abi_minor) +
           "; attention and KV-cache plugins need a backend built against 1.1 or later";
  }
  return "";
}

const PluginHost::Entry& PluginHost::find_extension(ComponentKind kind, const std::string& backend,
                                                    const std::string& name) const {
  const char* kind_name = component_kind_name(kind);
  auto it = entries_.find({kind, backend, name});
  if (it == entries_.end()) {
    std::vector<std::string> known;
    for (const auto& info : extensions(kind, backend)) known.push_back(info.name);
    throw Error(ErrorKind::kPlugin, std::string("no plugin registers ") + kind_name + " '" + name +
                                        "' for backend '" + backend + "'" +
                                        did_you_mean(name, known) +
                                        "; registered: " + quoted_list(known));
  }
  if (std::string why = unavailable_reason(it->second.info); !why.empty()) {
    throw Error(ErrorKind::kPlugin, std::string(kind_name) + " '" + name + "' of plugin '" +
                                        it->second.info.plugin + "' cannot be used: " + why);
  }
  return it->second;
}

const PluginHost::Entry& PluginHost::find(ComponentKind kind, const std::string& name) const {
  auto it = entries_.find({kind, "", name});
  if (it != entries_.end()) return it->second;
  const char* kind_name = component_kind_name(kind);
  // A backend is registered by the plugin of the same name (cuda, onednn):
  // when that plugin was refused, its reason is the answer.
  for (const PluginRecord& record : records_) {
    if (record.loaded || record.name != name) continue;
    throw Error(ErrorKind::kPlugin, std::string("no ") + kind_name + " named '" + name +
                                        "': plugin '" + name + "' (" + record.path.string() +
                                        ") was refused: " + record.refusal);
  }
  std::vector<std::string> known;
  for (const auto& info : components(kind)) known.push_back(info.name);
  const std::string hint = did_you_mean(name, known);
  // Not a typo of a loaded name: a refused plugin may be the one that
  // registers it (its components are unknown, so every one is named).
  std::string refused;
  if (hint.empty()) {
    int listed = 0, more = 0;
    for (const PluginRecord& record : records_) {
      if (record.loaded) continue;
      if (listed == 3) {
        ++more;
        continue;
      }
      refused += std::string(listed++ == 0 ? "" : "; ") + "'" + record.name + "' (" +
                 record.path.filename().string() + "): " + record.refusal;
    }
    if (more > 0) refused += "; and " + std::to_string(more) + " more";
  }
  throw Error(
      ErrorKind::kPlugin,
      std::string("no ") + kind_name + " named '" + name + "'" + hint + "; loaded " + kind_name +
          "s: " + quoted_list(known) +
          (refused.empty() ? "" : "; refused plugins, one of which may provide it: " + refused) +
          " (`duet plugins` lists what was found and why any was refused)");
}

namespace {

// Runs a plugin's factory. duet::Error passes through; anything else thrown
// is the plugin breaking its contract, reported as a plugin error naming the
// plugin and the component.
template <typename Factory, typename... Args>
auto call_factory(const Factory& factory, const ComponentInfo& info, Args&&... args) {
  try {
    return factory(std::forward<Args>(args)...);
  } catch (const Error&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw;  // out of memory, not a broken plugin: exit code 5
  } catch (const std::exception& e) {
    throw Error(ErrorKind::kPlugin, std::string("plugin '") + info.plugin + "' failed in " +
                                        component_kind_name(info.kind) + " '" + info.name +
                                        "': " + e.what());
  } catch (...) {  // `throw 42`: the process would otherwise abort
    throw Error(ErrorKind::kPlugin,
                std::string("plugin '") + info.plugin + "' failed in " +
                    component_kind_name(info.kind) + " '" + info.name +
                    "': its factory threw something that is not a std::exception (throw "
                    "duet::Error, or a std::exception, with a message)");
  }
}

// Wraps a plugin-made object so that its library outlives it: the deleter
// (host code) holds the library, and runs the plugin's destructor first.
template <typename T, typename Lib>
std::shared_ptr<T> keep_loaded(std::unique_ptr<T> object, std::shared_ptr<Lib> library,
                               const ComponentInfo& info) {
  if (!object) {
    throw Error(ErrorKind::kPlugin, std::string("plugin '") + info.plugin + "' returned no " +
                                        component_kind_name(info.kind) + " for '" + info.name +
                                        "'");
  }
  return std::shared_ptr<T>(object.release(), [library = std::move(library)](T* p) { delete p; });
}

}  // namespace

std::shared_ptr<Backend> PluginHost::create_backend(const std::string& name,
                                                    const Options& options) const {
  const Entry& e = find(ComponentKind::kBackend, name);
  return keep_loaded(call_factory(e.backend, e.info, options), e.library, e.info);
}

bool PluginHost::reads_vocabulary(const std::string& name) const {
  return static_cast<bool>(find(ComponentKind::kSampler, name).vocab_sampler);
}

std::shared_ptr<Sampler> PluginHost::create_sampler(const std::string& name, const Options& options,
                                                    const Tokenizer* tokenizer) const {
  const Entry& e = find(ComponentKind::kSampler, name);
  if (e.vocab_sampler) {
    return keep_loaded(call_factory(e.vocab_sampler, e.info, options, tokenizer), e.library,
                       e.info);
  }
  return keep_loaded(call_factory(e.sampler, e.info, options), e.library, e.info);
}

std::shared_ptr<Stage> PluginHost::create_stage(const std::string& name,
                                                const Options& options) const {
  const Entry& e = find(ComponentKind::kStage, name);
  return keep_loaded(call_factory(e.stage, e.info, options), e.library, e.info);
}

std::shared_ptr<Attention> PluginHost::create_attention(Backend& backend, const std::string& name,
                                                        const AttentionSpec& spec,
                                                        const Options& options) const {
  const Entry& e = find_extension(ComponentKind::kAttention, backend.name(), name);
  if (e.abi_minor >= 6) {
    return keep_loaded(call_factory(e.attention, e.info, backend, spec, options), e.library,
                       e.info);
  }
  // Its own specs end before `window`: the backend it is handed reads them so.
  struct Held {
    std::shared_ptr<PreWindowBackend> backend;
    std::shared_ptr<Attention> attention;  // destroyed first
  };
  auto held = std::make_shared<Held>();
  held->backend = std::make_shared<PreWindowBackend>(backend);
  held->attention = keep_loaded(call_factory(e.attention, e.info, *held->backend, spec, options),
                                e.library, e.info);
  return std::shared_ptr<Attention>(held, held->attention.get());
}

Support PluginHost::check_kv_cache(Backend& backend, const KVCacheSpec& spec,
                                   const Options& options) const {
  const Entry& e = find_extension(ComponentKind::kKVCache, backend.name(), spec.impl);
  return call_factory(e.kv_check, e.info, backend, spec, options);
}

std::shared_ptr<KVCache> PluginHost::create_kv_cache(Backend& backend, const KVCacheSpec& spec,
                                                     const Options& options) const {
  const Entry& e = find_extension(ComponentKind::kKVCache, backend.name(), spec.impl);
  return keep_loaded(call_factory(e.kv_cache, e.info, backend, spec, options), e.library, e.info);
}

}  // namespace duet
