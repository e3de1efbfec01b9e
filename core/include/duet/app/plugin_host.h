// duet/app/plugin_host.h — finds, checks and loads plugin libraries, and creates
// the components they register.
//
// The host never throws for a bad library: a library that cannot be used is
// recorded as refused, with the reason, and the host keeps working. Component
// lookups throw duet::Error(kPlugin) naming the missing component and the
// names that exist. Objects created through the host keep their plugin
// alive (destroy() not yet called) for as long as they live, even past the
// host itself; accepted libraries stay mapped until the process exits.
// Thread-safety: none; use a host from one thread.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "duet/export.h"
#include "duet/plugin.h"

namespace duet {

enum class ComponentKind { kBackend, kSampler, kStage, kAttention, kKVCache };
// "backend", "sampler", "stage", "attention", "KV-cache storage".
DUET_API const char* component_kind_name(ComponentKind kind);

struct DUET_API ComponentInfo {
  ComponentKind kind;
  std::string name;
  std::string summary;
  std::string plugin;   // the plugin that registered it, "core" for built-ins
  std::string backend;  // attention and KV-cache storage: the backend it serves
};

// A file in a plugin folder that load_dirs did not try, and why.
struct DUET_API SkippedFile {
  std::filesystem::path path;
  std::string reason;  // e.g. "not named duet-<name>.so"
};

struct DUET_API PluginRecord {
  std::filesystem::path path;
  std::string name;  // from the descriptor; the file name when unreadable
  std::string version;
  std::string summary;
  bool loaded = false;
  std::string refusal;  // why it was refused; empty when loaded
  std::vector<ComponentInfo> components;
};

// Library file names the host picks up when it scans a folder.
DUET_API bool is_plugin_file_name(const std::string& file_name);

// The folders searched for plugins, in order: `config_paths` (a pipeline's
// plugins.paths, relative ones taken from `config_dir`), each entry of the
// DUET_PLUGIN_PATH environment variable (':'-separated), the install's plugin
// folder (<libdir>/duet/plugins beside libduet.so) and, for a libduet.so in a
// build tree's core/ (or a test in its tests/ that links core statically),
// that build's plugins/. A `config_paths` entry that is not a folder throws
// duet::Error(kConfig) naming it (a misspelt folder would otherwise leave its
// plugins unfound without a word); DUET_PLUGIN_PATH entries that are not
// folders are skipped (plugin_path_warnings() names them).
DUET_API std::vector<std::filesystem::path> plugin_search_dirs(
    const std::vector<std::string>& config_paths, const std::filesystem::path& config_dir);

// One line for each DUET_PLUGIN_PATH entry that is not a folder ("DUET_PLUGIN_PATH
// names '/opt/x', which is not a folder; it is skipped"), for a program to
// print as a warning; empty when every entry is one.
DUET_API std::vector<std::string> plugin_path_warnings();

class DUET_API PluginHost {
 public:
  PluginHost();
  ~PluginHost();
  PluginHost(const PluginHost&) = delete;
  PluginHost& operator=(const PluginHost&) = delete;

  // Loads one library and returns (a copy of) its record, loaded or
  // refused. A plugin whose name is already loaded is refused as a duplicate.
  // A file is tried once per host: loading it again returns its record.
  PluginRecord load(const std::filesystem::path& file);

  // Loads every plugin file (is_plugin_file_name) in each folder, in folder
  // order and then file-name order; every other file of those folders is
  // noted in skipped().
  void load_dirs(const std::vector<std::filesystem::path>& dirs);

  const std::vector<PluginRecord>& records() const { return records_; }
  // The files of the scanned folders that were not tried (`duet plugins
  // --verbose`), in scan order, each once however often it was scanned.
  const std::vector<SkippedFile>& skipped() const { return skipped_; }
  // Every component of `kind`; for attention and KV-cache storage, those of
  // every backend, available or not.
  std::vector<ComponentInfo> components(ComponentKind kind) const;
  bool has(ComponentKind kind, const std::string& name) const;

  // Attention (kind kAttention) or KV-cache storage (kKVCache) that plugins
  // registered for backend `backend`, available or not, in name order.
  std::vector<ComponentInfo> extensions(ComponentKind kind, const std::string& backend) const;
  // Why extension `info` cannot be used now, e.g. "backend 'nosuch' is not
  // loaded (loaded backends: 'onednn', 'reference')" or "backend 'old' was
  // built against Duet ABI 1.0; attention and KV-cache plugins need a
  // backend built against 1.1 or later"; empty when it can.
  std::string unavailable_reason(const ComponentInfo& info) const;
  // The Duet ABI minor version backend `name`'s plugin was built against
  // (DUET_ABI_MINOR for core built-ins). REQUIRES: has(kBackend, name).
  uint32_t backend_abi_minor(const std::string& name) const;
  // Whether backend `name` may be asked for a KV cache in slot rows
  // (Backend::create_kv_cache_rows: its plugin was built against ABI 1.9 or
  // later). REQUIRES: has(kBackend, name).
  bool backend_makes_kv_rows(const std::string& name) const;
  // The same for component `name` of any kind (a stage: whether its
  // interface is this host's, ABI 1.7). REQUIRES: has(kind, name).
  uint32_t abi_minor(ComponentKind kind, const std::string& name) const;
  // The same for attention or KV-cache storage `name` a plugin registered
  // for backend `backend` (whether the host may call KVCache's ABI 1.4
  // range export). REQUIRES: it is among extensions(kind, backend).
  uint32_t extension_abi_minor(ComponentKind kind, const std::string& backend,
                               const std::string& name) const;

  // Create components by name. Throw duet::Error(kPlugin) for an unknown name
  // (listing the known ones) and pass on the factory's own errors.
  std::shared_ptr<Backend> create_backend(const std::string& name, const Options& options) const;
  // Whether sampler `name` was registered with add_vocab_sampler (ABI 1.5).
  // REQUIRES: has(kSampler, name).
  bool reads_vocabulary(const std::string& name) const;
  // `tokenizer` reaches a vocabulary sampler (ABI 1.5, add_vocab_sampler);
  // null there means "validate the options only". Other samplers ignore it.
  std::shared_ptr<Sampler> create_sampler(const std::string& name, const Options& options,
                                          const Tokenizer* tokenizer = nullptr) const;
  std::shared_ptr<Stage> create_stage(const std::string& name, const Options& options) const;

  // Create, or check, extension `name` registered for backend.name(). Throw
  // duet::Error(kPlugin) for an unknown or unavailable one (with the
  // reason) and pass on the factory's own errors.
  std::shared_ptr<Attention> create_attention(Backend& backend, const std::string& name,
                                              const AttentionSpec& spec,
                                              const Options& options) const;
  Support check_kv_cache(Backend& backend, const KVCacheSpec& spec, const Options& options) const;
  std::shared_ptr<KVCache> create_kv_cache(Backend& backend, const KVCacheSpec& spec,
                                           const Options& options) const;

 private:
  class Library;
  class Registrar;
  struct Entry {
    ComponentInfo info;
    std::shared_ptr<Library> library;  // null for core built-ins
    uint32_t abi_minor = DUET_ABI_MINOR;
    BackendFactory backend;
    SamplerFactory sampler;
    VocabSamplerFactory vocab_sampler;
    StageFactory stage;
    AttentionFactory attention;
    KVCacheCheck kv_check;
    KVCacheFactory kv_cache;
  };
  // (kind, backend served — empty but for extensions —, name).
  using Key = std::tuple<ComponentKind, std::string, std::string>;
  const Entry& find(ComponentKind kind, const std::string& name) const;
  const Entry& find_extension(ComponentKind kind, const std::string& backend,
                              const std::string& name) const;

  std::vector<PluginRecord> records_;
  std::vector<SkippedFile> skipped_;
  std::map<Key, Entry> entries_;
  std::vector<std::shared_ptr<Library>> libraries_;
};

}  // namespace duet
