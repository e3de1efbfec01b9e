#include "duet/app/pipeline_config.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <optional>

#include "config/yaml_override.h"
#include "config/yaml_schema.h"
#include "config/yaml_tree.h"
#include "duet/app/suggest.h"
#include "duet/error.h"

namespace duet {
namespace {

namespace fs = std::filesystem;
using yaml::child_path;
using yaml::Entry;
using yaml::get;
using yaml::item_path;
using yaml::Node;
using yaml::Origin;
using yaml::parse_integer;
using yaml::Problems;

constexpr int64_t kMaxCapacityTokens = 16777216;
const std::vector<std::string> kKVCacheDTypes = {"f32", "f16", "bf16", "q8_0"};

}  // namespace

std::string_view window_layers_name(WindowLayers mode) {
  switch (mode) {
    case WindowLayers::kRing:
      return "ring";
    case WindowLayers::kFull:
      return "full";
    case WindowLayers::kAuto:
      break;
  }
  return "auto";
}

namespace {

SourcePos pos_of(const Origin& origin) {
  if (origin.override_index >= 0) return SourcePos{};
  return SourcePos{origin.line, origin.column};
}

// A sampler-chain or stage item: `- name`, `- name: value`.
struct Link {
  std::string name;
  const Node* value;  // nullptr for `- name`
  Origin origin;
};

// Checks one parsed document against the schema of docs/pipeline-yaml.md.
// Every problem is reported and reading goes on, so that one run of
// `duet validate` shows them all; a value with a problem keeps its default.
class Reader : yaml::SchemaReader {
 public:
  using SchemaReader::SchemaReader;

  PipelineConfig read(const Node& root) {
    PipelineConfig config;
    if (!expect_map(root, "",
                    {"model", "plugins", "backend", "backends", "components", "stages", "batching",
                     "debug"}))
      return config;
    read_model(required(root, "", "model"), config.model);
    read_plugins(get(root, "plugins"), config.plugins);
    // A null `backend:` is no backend: how an experiment's variant (or
    // --set 'backend=~') turns a base pipeline into one with `backends:`.
    const Node* backend = get(root, "backend");
    if (backend != nullptr && backend->is_null()) backend = nullptr;
    read_backend(backend, config.backend);
    if (const Node* backends = get(root, "backends")) {
      if (backend != nullptr) {
        report(backend->origin, "backend",
               "a pipeline places its stages either on one `backend:` or on named `backends:`, "
               "not both; remove one");
      }
      read_backends(*backends, config.backends);
    }
    read_components(get(root, "components"), config);
    read_stages(required(root, "", "stages"), config.stages);
    place_stages(config);
    read_batching(get(root, "batching"), config.batching);
    if (const Node* debug = get(root, "debug");
        debug != nullptr && expect_map(*debug, "debug", {"check_plugins"})) {
      if (const Node* n = get(*debug, "check_plugins"))
        read_bool(*n, "debug.check_plugins", config.debug.check_plugins);
    }
    return config;
  }

 private:
  // `backends: {NAME: {plugin: P, options: {...}, kv_cache: {dtype: D}}}`.
  void read_backends(const Node& node, std::vector<NamedBackend>& out) {
    backends_given_ = true;
    if (!node.is_map()) {
      type_error(node, "backends", "a map from a name to {plugin: NAME, options: {...}}");
      return;
    }
    if (node.entries.empty()) {
      report(node.origin, "backends",
             "names no backend; give at least one, e.g. {cpu: {plugin: onednn}}, or use "
             "`backend:`");
      return;
    }
    for (const Entry& e : node.entries) {
      const std::string path = "backends." + e.key;
      if (!valid_backend_name(e.key)) {
        report(e.key_origin, path,
               "a backend's name is [a-z0-9_-]+, at most 64 characters; rename it");
        placement_reported_ = true;
        continue;
      }
      if (!expect_map(e.value, path, {"plugin", "options", "kv_cache"})) continue;
      NamedBackend b{e.key, "", Options(path + ".options"), std::nullopt, pos_of(e.key_origin)};
      backend_origins_[e.key] = e.key_origin;
      if (const Node* plugin = required(e.value, path, "plugin")) {
        if (plugin->is_list()) {
          type_error(*plugin, path + ".plugin", "one backend's name (a choice is `backend:`'s)");
        } else {
          read_name(*plugin, path + ".plugin", b.plugin);
        }
      }
      if (const Node* options = get(e.value, "options")) read_scalar_map(*options, b.options);
      if (const Node* kv = get(e.value, "kv_cache");
          kv != nullptr && expect_map(*kv, path + ".kv_cache", {"dtype"})) {
        if (const Node* dtype = get(*kv, "dtype")) {
          DType type = DType::kF32;
          if (read_kv_dtype(*dtype, path + ".kv_cache.dtype", type)) b.kv_dtype = type;
        }
      }
      out.push_back(std::move(b));
    }
  }

  static bool valid_backend_name(const std::string& name) {
    if (name.empty() || name.size() > 64) return false;
    return std::all_of(name.begin(), name.end(), [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    });
  }

  bool read_kv_dtype(const Node& node, const std::string& path, DType& out) {
    const bool listed = node.is_scalar() && std::find(kKVCacheDTypes.begin(), kKVCacheDTypes.end(),
                                                      node.scalar) != kKVCacheDTypes.end();
    std::optional<DType> type = listed ? dtype_from_name(node.scalar) : std::nullopt;
    if (!type) {
      report(node.origin, path,
             "expected one of " + quoted_list(kKVCacheDTypes) + ", found " + yaml::found(node) +
                 (node.is_scalar() ? did_you_mean(node.scalar, kKVCacheDTypes) : ""));
      return false;
    }
    out = *type;
    return true;
  }

  // Each stage's `backend:` against `backends:` (StageConfig::backend).
  void place_stages(PipelineConfig& config) {
    std::vector<std::string> names;
    for (const NamedBackend& b : config.backends) names.push_back(b.name);
    // An unreadable `backends:` has been reported; what depends on it is not.
    if (backends_given_ && (config.backends.empty() || placement_reported_)) return;
    bool misplaced = false;
    for (size_t i = 0; i < config.stages.size(); ++i) {
      StageConfig& stage = config.stages[i];
      const std::string path = stage.options.path() + ".backend";
      const Origin& at = stage_backend_origins_[i];
      if (config.backends.empty()) {
        if (!stage.backend.empty()) {
          report(at, path,
                 "names backend '" + stage.backend +
                     "', but this pipeline has no `backends:` to name; define `backends: {" +
                     stage.backend + ": {plugin: ...}}` instead of `backend:`, or remove it");
        }
        continue;
      }
      if (stage.backend.empty()) {
        if (names.size() == 1) {
          stage.backend = names.front();
        } else {
          misplaced = true;
          report(at, stage.options.path(),
                 "this pipeline has several backends (" + quoted_list(names) +
                     "); say which this stage runs on with `backend: NAME`");
        }
      } else if (std::find(names.begin(), names.end(), stage.backend) == names.end()) {
        misplaced = true;
        report(at, path,
               "'" + stage.backend + "' is not defined under `backends:`" +
                   did_you_mean(stage.backend, names) + "; defined: " + quoted_list(names));
      }
    }
    if (misplaced) return;  // which backends are unused is not known yet
    for (const NamedBackend& b : config.backends) {
      const bool used = std::any_of(config.stages.begin(), config.stages.end(),
                                    [&](const StageConfig& s) { return s.backend == b.name; });
      if (!used && !config.stages.empty()) {
        report(
            backend_origins_.count(b.name) ? backend_origins_.at(b.name) : Origin{},
            "backends." + b.name,
            "no stage runs on it; place a stage on it with `backend: " + b.name + "` or remove it");
      }
    }
  }

  void read_model(const Node* node, ModelConfig& out) {
    if (node == nullptr || !expect_map(*node, "model", {"path", "chat", "system", "chat_template"}))
      return;
    if (const Node* path = required(*node, "model", "path")) {
      std::string text;
      if (read_string(*path, "model.path", text)) {
        if (text.empty())
          type_error(*path, "model.path", "the path of a GGUF file");
        else
          out.path = resolve(*path, text);
      }
    }
    if (const Node* chat = get(*node, "chat")) read_bool(*chat, "model.chat", out.chat);
    if (const Node* system = get(*node, "system"))
      read_string(*system, "model.system", out.system_prompt);
    if (const Node* tmpl = get(*node, "chat_template"))
      read_string(*tmpl, "model.chat_template", out.chat_template);
  }

  void read_plugins(const Node* node, PluginsConfig& out) {
    if (node == nullptr || !expect_map(*node, "plugins", {"paths"})) return;
    const Node* paths = get(*node, "paths");
    if (paths == nullptr) return;
    if (!paths->is_list()) {
      type_error(*paths, "plugins.paths", "a list of folders");
      return;
    }
    for (size_t i = 0; i < paths->items.size(); ++i) {
      std::string text;
      if (read_string(paths->items[i], item_path("plugins.paths", i), text))
        out.paths.push_back(resolve(paths->items[i], text).string());
    }
  }

  // A map whose values are scalars, e.g. `options: {threads: 2}`.
  void read_scalar_map(const Node& node, Options& out) {
    if (node.is_null()) return;
    if (!node.is_map()) {
      type_error(node, out.path(), "a map of options");
      return;
    }
    for (const Entry& e : node.entries) {
      if (e.value.is_scalar())
        out.set(e.key, e.value.scalar);
      else
        type_error(e.value, child_path(out.path(), e.key), "a single value");
    }
  }

  void read_backend(const Node* node, BackendConfig& out) {
    if (node == nullptr || !expect_map(*node, "backend", {"plugin", "options"})) return;
    const Node* plugin = get(*node, "plugin");
    const Node* options = get(*node, "options");
    if (plugin == nullptr || !plugin->is_list()) {
      if (plugin != nullptr) read_name(*plugin, "backend.plugin", out.plugin);
      if (options == nullptr) return;
      if (options->is_map()) {
        for (const Entry& e : options->entries) {
          if (!e.value.is_map()) continue;
          report(e.value.origin, "backend.options." + e.key,
                 "options per backend need backend.plugin to be a list; to run on '" + e.key +
                     "' alone and keep its options, write backend.plugin: [" + e.key +
                     "] (--set 'backend.plugin=[" + e.key + "]')");
        }
        if (std::any_of(options->entries.begin(), options->entries.end(),
                        [](const Entry& e) { return e.value.is_map(); })) {
          return;
        }
      }
      read_scalar_map(*options, out.options);
      return;
    }
    read_backend_choice(*plugin, options, out);
  }

  // `plugin: [A, B]` with `options: {A: {KEY: VALUE}}`.
  void read_backend_choice(const Node& plugins, const Node* options, BackendConfig& out) {
    if (plugins.items.empty()) {
      type_error(plugins, "backend.plugin", "a backend's name or a non-empty list of them");
      return;
    }
    std::vector<std::string> names;
    for (size_t i = 0; i < plugins.items.size(); ++i) {
      std::string name;
      read_name(plugins.items[i], item_path("backend.plugin", i), name);
      if (name.empty()) continue;
      if (std::find(names.begin(), names.end(), name) != names.end()) {
        report(plugins.items[i].origin, item_path("backend.plugin", i),
               "'" + name + "' is listed twice; list each backend once");
        continue;
      }
      names.push_back(name);
      out.choice.push_back(BackendCandidate{name, Options("backend.options." + name)});
    }
    out.plugin.clear();
    if (options == nullptr || options->is_null()) return;
    if (!options->is_map()) {
      type_error(*options, "backend.options", "a map from each listed backend to its options");
      return;
    }
    for (const Entry& e : options->entries) {
      auto it = std::find_if(out.choice.begin(), out.choice.end(),
                             [&](const BackendCandidate& c) { return c.plugin == e.key; });
      if (it == out.choice.end()) {
        std::string hint = did_you_mean(e.key, names);
        problems_.add(e.key_origin, "backend.options." + e.key +
                                        ": backend.plugin is a list, so backend.options " +
                                        "holds one map of options per listed backend, and '" +
                                        e.key + "' is not listed" +
                                        (hint.empty() ? "; listed: " + quoted_list(names) : hint));
        continue;
      }
      read_scalar_map(e.value, it->options);
    }
  }

  void read_batching(const Node* node, BatchingConfig& out) {
    if (node == nullptr ||
        !expect_map(*node, "batching",
                    {"max_sequences", "max_step_tokens", "prefix_caching", "draft_rows"}))
      return;
    if (const Node* n = get(*node, "max_sequences"))
      read_integer<int32_t>(*n, "batching.max_sequences", 1, 1024, out.max_sequences);
    if (const Node* n = get(*node, "max_step_tokens"))
      read_integer<int32_t>(*n, "batching.max_step_tokens", 1, 65536, out.max_step_tokens);
    if (const Node* n = get(*node, "prefix_caching"))
      read_bool(*n, "batching.prefix_caching", out.prefix_caching);
    if (const Node* n = get(*node, "draft_rows"))
      read_integer<int32_t>(*n, "batching.draft_rows", 0, 65536, out.draft_rows);
  }

  void read_components(const Node* node, PipelineConfig& out) {
    if (node == nullptr || !expect_map(*node, "components", {"attention", "kv_cache", "sampler"}))
      return;
    if (const Node* attention = get(*node, "attention");
        attention != nullptr &&
        expect_map(*attention, "components.attention", {"impl", "options"})) {
      if (const Node* impl = get(*attention, "impl"))
        read_name(*impl, "components.attention.impl", out.attention.impl);
      if (const Node* options = get(*attention, "options"))
        read_scalar_map(*options, out.attention.options);
    }
    read_kv_cache(get(*node, "kv_cache"), out.kv_cache);
    read_sampler(get(*node, "sampler"), out.sampler);
  }

  void read_kv_cache(const Node* node, KVCacheConfig& out) {
    const std::string path = "components.kv_cache";
    if (node == nullptr || !expect_map(*node, path,
                                       {"impl", "capacity_tokens", "block_tokens", "dtype",
                                        "options", "window_layers"}))
      return;
    if (const Node* window = get(*node, "window_layers")) {
      const std::vector<std::string> kModes = {
          std::string(window_layers_name(WindowLayers::kAuto)),
          std::string(window_layers_name(WindowLayers::kRing)),
          std::string(window_layers_name(WindowLayers::kFull))};
      const auto at = window->is_scalar() ? std::find(kModes.begin(), kModes.end(), window->scalar)
                                          : kModes.end();
      if (at != kModes.end()) {
        out.window_layers = static_cast<WindowLayers>(at - kModes.begin());
      } else {
        report(window->origin, path + ".window_layers",
               "expected one of " + quoted_list(kModes) + ", found " + yaml::found(*window) +
                   (window->is_scalar() ? did_you_mean(window->scalar, kModes) : ""));
      }
    }
    if (const Node* impl = get(*node, "impl")) read_name(*impl, path + ".impl", out.impl);
    if (const Node* options = get(*node, "options")) read_scalar_map(*options, out.options);
    bool capacity_ok = true;
    if (const Node* capacity = get(*node, "capacity_tokens"))
      capacity_ok = read_integer<int64_t>(*capacity, path + ".capacity_tokens", 1,
                                          kMaxCapacityTokens, out.capacity_tokens);
    if (const Node* block = get(*node, "block_tokens")) {
      int64_t tokens = 0;
      if (read_integer<int64_t>(*block, path + ".block_tokens", 0, kMaxCapacityTokens, tokens)) {
        out.block_tokens = static_cast<int32_t>(tokens);
        if (capacity_ok && tokens != 0 && out.capacity_tokens % tokens != 0)
          report(block->origin, path + ".block_tokens",
                 std::to_string(tokens) + " does not divide capacity_tokens (" +
                     std::to_string(out.capacity_tokens) +
                     "); use a divisor of it, or 0 for one block of the whole capacity");
      }
    }
    if (const Node* dtype = get(*node, "dtype")) {
      const bool listed = dtype->is_scalar() &&
                          std::find(kKVCacheDTypes.begin(), kKVCacheDTypes.end(), dtype->scalar) !=
                              kKVCacheDTypes.end();
      std::optional<DType> type = listed ? dtype_from_name(dtype->scalar) : std::nullopt;
      if (type)
        out.dtype = *type;
      else
        report(dtype->origin, path + ".dtype",
               "expected one of " + quoted_list(kKVCacheDTypes) + ", found " + yaml::found(*dtype) +
                   (dtype->is_scalar() ? did_you_mean(dtype->scalar, kKVCacheDTypes) : ""));
    }
  }

  void read_sampler(const Node* node, SamplerConfig& out) {
    const std::string path = "components.sampler";
    if (node == nullptr || !expect_map(*node, path, {"seed", "chain"})) return;
    if (const Node* seed = get(*node, "seed"))
      read_integer<uint64_t>(*seed, path + ".seed", 0, std::numeric_limits<uint64_t>::max(),
                             out.seed);
    const Node* chain = get(*node, "chain");
    if (chain == nullptr) return;
    if (!chain->is_list()) {
      type_error(*chain, path + ".chain", "a list of samplers such as [top_k: 40, greedy]");
      return;
    }
    for (size_t i = 0; i < chain->items.size(); ++i) {
      const std::string at = item_path(path + ".chain", i);
      std::optional<Link> link = read_link(chain->items[i], at, "sampler", "'- top_k: 40'");
      if (!link) continue;
      SamplerLink sampler{link->name, Options(child_path(at, link->name)), pos_of(link->origin)};
      if (link->value != nullptr) {
        // `- top_k: 40` is shorthand for `- top_k: {value: 40}`.
        if (link->value->is_scalar())
          sampler.options.set("value", link->value->scalar);
        else if (link->value->is_list())
          type_error(*link->value, sampler.options.path(), "a single value or a map of options");
        else
          read_scalar_map(*link->value, sampler.options);
      }
      out.chain.push_back(std::move(sampler));
    }
  }

  // Reads `- name` or `- name: value`; reports anything else.
  std::optional<Link> read_link(const Node& item, const std::string& path, const std::string& what,
                                const std::string& example) {
    if (item.is_scalar() && !item.scalar.empty()) return Link{item.scalar, nullptr, item.origin};
    if (item.is_map() && item.entries.size() == 1 && !item.entries.front().key.empty()) {
      const Entry& e = item.entries.front();
      return Link{e.key, &e.value, e.key_origin};
    }
    if (item.is_map() && item.entries.size() > 1) {
      std::vector<std::string> keys;
      for (const Entry& e : item.entries) keys.push_back(e.key);
      report(item.origin, path,
             "one " + what + " per list item, found " + std::to_string(keys.size()) + " keys " +
                 quoted_list(keys) + "; start each with its own '-'");
    } else {
      type_error(item, path, "a " + what + " such as " + example);
    }
    return std::nullopt;
  }

  void read_stages(const Node* node, std::vector<StageConfig>& out) {
    if (node == nullptr) return;
    if (!node->is_list() || node->items.empty()) {
      type_error(*node, "stages", "a list of at least one stage such as '- decode: {}'");
      return;
    }
    for (size_t i = 0; i < node->items.size(); ++i) {
      const std::string at = item_path("stages", i);
      std::optional<Link> link = read_link(node->items[i], at, "stage", "'- decode: {}'");
      if (!link) continue;
      check_stage_order(*link, at, out);
      StageConfig stage{
          link->name, Options(child_path(at, link->name)), {}, pos_of(link->origin), ""};
      stage_backend_origins_.push_back(link->origin);
      if (link->value != nullptr) read_stage_options(*link->value, stage);
      out.push_back(std::move(stage));
    }
  }

  // Each stage runs once, and prefill (which fills the KV cache with the
  // prompt) before the decode loop that reads it.
  void check_stage_order(const Link& link, const std::string& at,
                         const std::vector<StageConfig>& earlier) {
    for (size_t j = 0; j < earlier.size(); ++j) {
      if (earlier[j].name == link.name) {
        report(link.origin, at,
               "duplicate stage '" + link.name + "' (also stages[" + std::to_string(j) +
                   "]); each stage runs once");
      } else if (link.name == "prefill" && earlier[j].name == "decode") {
        report(link.origin, at,
               "'prefill' must come before 'decode' (stages[" + std::to_string(j) + "])");
      }
    }
  }

  // Stage options are single values, or lists of them (e.g. stop strings).
  void read_stage_options(const Node& node, StageConfig& stage) {
    const std::string& path = stage.options.path();
    if (node.is_null()) return;
    if (!node.is_map()) {
      type_error(node, path, "a map of options such as {max_new_tokens: 128}");
      return;
    }
    for (const Entry& e : node.entries) {
      const std::string key_path = child_path(path, e.key);
      if (e.key == "backend") {  // core's, for every stage
        read_name(e.value, key_path, stage.backend);
        stage_backend_origins_.back() = e.value.origin;
      } else if (e.value.is_scalar()) {
        stage.options.set(e.key, e.value.scalar);
      } else if (e.value.is_list()) {
        std::vector<std::string> values;
        for (size_t i = 0; i < e.value.items.size(); ++i) {
          if (e.value.items[i].is_scalar())
            values.push_back(e.value.items[i].scalar);
          else
            type_error(e.value.items[i], item_path(key_path, i), "a single value");
        }
        stage.lists[e.key] = std::move(values);
      } else {
        type_error(e.value, key_path, "a single value or a list of them");
      }
    }
  }

  bool backends_given_ = false;                    // the document has `backends:`
  bool placement_reported_ = false;                // a backend's name was refused
  std::map<std::string, Origin> backend_origins_;  // each `backends:` key
  std::vector<Origin> stage_backend_origins_;      // per stage: its `backend:`, else the stage
};

}  // namespace

PipelineConfig parse_pipeline_config(std::string_view yaml_text, const std::string& source_name,
                                     const fs::path& base_dir,
                                     const std::vector<std::string>& overrides) {
  if (yaml_text.size() > kMaxPipelineFileBytes) {
    throw yaml::too_large(source_name, "pipeline file", yaml_text.size(), kMaxPipelineFileBytes);
  }
  Problems problems(source_name, overrides);
  std::optional<Node> root = yaml::parse(yaml_text, -1, problems);
  if (!root) problems.throw_if_any();  // parse() has reported why; this throws
  yaml::apply_overrides(*root, overrides, problems);
  PipelineConfig config = Reader(problems, base_dir).read(*root);
  problems.throw_if_any();
  config.source = source_name;
  return config;
}

PipelineConfig load_pipeline_config(const fs::path& file,
                                    const std::vector<std::string>& overrides) {
  const std::string name = file.string();
  const std::string text = yaml::read_file(file, "pipeline file", kMaxPipelineFileBytes);
  PipelineConfig config = parse_pipeline_config(text, name, file.parent_path(), overrides);
  config.source = file;
  return config;
}

std::string format_source_pos(const fs::path& source, SourcePos pos) {
  if (pos.line == 0) return source.string() + " (--set)";
  return source.string() + ":" + std::to_string(pos.line) + ":" + std::to_string(pos.column);
}

}  // namespace duet
