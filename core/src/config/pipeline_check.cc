#include "duet/app/pipeline_check.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <utility>

#include "duet/app/gguf.h"
#include "duet/app/suggest.h"
#include "duet/byte_size.h"
#include "duet/error.h"
#include "duet/plugin.h"
#include "engine/stage_options.h"
#include "plugins/backend_components.h"

namespace duet {
namespace {

// The first ABI minor version of the stage interface (duet/stage.h).
constexpr uint32_t kStageInterfaceMinor = 7;

// Throws duet::Error(kPlugin) for stage `name` of a plugin built against an
// older stage interface (Stage::run, Stage::batched: ABI 1.0–1.6), whose
// objects this host must not call; it is checked before any is made.
void check_plugin_stage(const PluginHost& host, const std::string& name) {
  const uint32_t minor = host.abi_minor(ComponentKind::kStage, name);
  if (minor >= kStageInterfaceMinor) return;
  std::string plugin;
  for (const ComponentInfo& c : host.components(ComponentKind::kStage)) {
    if (c.name == name) plugin = c.plugin;
  }
  const std::string major = std::to_string(DUET_ABI_MAJOR);
  throw Error(ErrorKind::kPlugin,
              "stage '" + name + "' (plugin '" + plugin + "') was built against Duet ABI " + major +
                  "." + std::to_string(minor) + ", whose stage interface is gone: stages " +
                  "need ABI " + major + "." + std::to_string(kStageInterfaceMinor) +
                  " or later (duet/stage.h: limits() and start_sequence(), which the scheduler "
                  "steps); rebuild the plugin against this Duet SDK");
}

// Collects problems instead of stopping at the first, remembering the kind
// of the first for the exit code.
class Problems {
 public:
  // Runs `step`; a duet::Error it throws becomes a problem prefixed with
  // `where`. Returns whether it succeeded.
  bool attempt(const std::string& where, const std::function<void()>& step) {
    try {
      step();
      return true;
    } catch (const Error& e) {
      add(e.kind(), where.empty() ? e.what() : where + ": " + e.what());
    } catch (const std::exception& e) {
      // Only plugin code throws anything but duet::Error here.
      add(ErrorKind::kPlugin, (where.empty() ? "" : where + ": ") + "a plugin failed: " + e.what());
    }
    return false;
  }
  void add(ErrorKind kind, const std::string& message) {
    if (lines_.empty()) kind_ = kind;
    lines_.push_back(message);
  }
  bool empty() const { return lines_.empty(); }
  ErrorKind kind() const { return kind_; }
  const std::vector<std::string>& lines() const { return lines_; }
  void throw_if_any() const {
    if (lines_.empty()) return;
    std::string all;
    for (const auto& l : lines_) all += (all.empty() ? "" : "\n") + l;
    throw Error(kind_, all);
  }

 private:
  ErrorKind kind_ = ErrorKind::kConfig;
  std::vector<std::string> lines_;
};

// Device bytes of a cache, or nullopt when a slot cannot be stored in the
// dtype (a block-quantized dtype needs n_kv_heads * head_dim to be a whole
// number of blocks).
std::optional<uint64_t> kv_cache_bytes(const KVCacheSpec& s) {
  const auto per_slot = dtype_row_bytes(
      s.dtype, static_cast<uint64_t>(s.n_kv_heads) * static_cast<uint64_t>(s.head_dim));
  if (!per_slot) return std::nullopt;
  return 2 * static_cast<uint64_t>(s.n_layers) * static_cast<uint64_t>(s.capacity_tokens) *
         *per_slot;
}

// The device bytes of a cache of `spec`, or 0 after adding a problem at
// `key` when its dtype cannot hold a slot.
uint64_t sized_kv_cache(const KVCacheSpec& spec, const std::string& key, Problems& problems) {
  if (auto bytes = kv_cache_bytes(spec)) return *bytes;
  problems.add(ErrorKind::kConfig, key + " " + std::string(dtype_name(spec.dtype)) +
                                       " cannot hold slots of " +
                                       std::to_string(spec.n_kv_heads * spec.head_dim) +
                                       " values (not a whole number of blocks); use f32 or f16");
  return 0;
}

// The bytes of the full cache and of the window rings' (none when its
// n_layers is 0).
uint64_t sized_caches(const KVCacheSpec& full, const KVCacheSpec& window, const std::string& key,
                      Problems& problems) {
  const uint64_t bytes = sized_kv_cache(full, key, problems);
  return window.n_layers == 0 ? bytes : bytes + (bytes == 0 ? 0 : *kv_cache_bytes(window));
}

// components.kv_cache.window_layers for this model: with rings, moves the
// sliding-window layers from out.kv_cache to out.window_cache.
void plan_window_layers(const PipelineConfig& config, const std::string& src, PipelineCheck& out,
                        Problems& problems) {
  const ModelHParams& h = out.hparams;
  const KVCacheConfig& kc = config.kv_cache;
  const std::string key = src + ": components.kv_cache.window_layers";
  int32_t window = 0, windowed = 0;
  for (const int32_t w : h.layer_windows) {
    window = std::max(window, w);
    windowed += w > 0 ? 1 : 0;
  }
  const bool explicit_ring = kc.window_layers == WindowLayers::kRing;
  if (kc.window_layers == WindowLayers::kFull || (windowed == 0 && !explicit_ring)) return;
  if (windowed == 0) {
    problems.add(ErrorKind::kConfig, key + ": ring, but " + h.architecture +
                                         " has no sliding-window layers; use auto or full");
    return;
  }
  // A step's rows of one sequence must fit its ring with the window.
  const WindowRingGeometry g = window_ring_geometry(window, config.batching.max_sequences,
                                                    kc.capacity_tokens, out.kv_cache.block_tokens);
  std::string refused;
  if (kc.impl != KVCacheConfig{}.impl) {
    refused = "storage '" + kc.impl + "' would be made twice with the same " + kc.options.path() +
              " (rings need the backends' own '" + KVCacheConfig{}.impl + "')";
  } else if (config.backends.size() > 1) {
    refused = "the pipeline runs on " + std::to_string(config.backends.size()) +
              " backends and their handover moves full caches only";
  } else if (windowed == h.n_layers) {
    refused = "every layer of " + h.architecture + " has a window (rings need a full layer too)";
  }
  if (!explicit_ring && (!refused.empty() || g.pool_tokens >= kc.capacity_tokens)) return;
  if (!refused.empty()) {
    problems.add(ErrorKind::kConfig,
                 key + ": ring cannot be used: " + refused + "; use auto or full");
    return;
  }
  out.window_cache = out.kv_cache;
  out.window_cache.n_layers = windowed;
  out.window_cache.capacity_tokens = g.pool_tokens;
  out.window_cache.block_tokens = g.block_tokens;
  out.kv_cache.n_layers -= windowed;
  out.window_ring_tokens = g.ring_tokens;
}

// Checks that `backend` (or a plugin for it) provides the KV cache and the
// attention the pipeline names and accepts them for this model (read into
// out.hparams and out.kv_cache). Each problem is added to `problems`, its
// line starting with `prefix`; sets out.attention_impl.
void check_backend(Backend& backend, const PluginHost& host, const PipelineConfig& config,
                   const std::string& prefix, const ModelHParams& h, BackendPlacement& out,
                   Problems& problems) {
  // A named backend's cache dtype is its own key: the fix the reasons name.
  const auto own_keys = [&out](std::string reason) {
    const std::string shared = "components.kv_cache.dtype";
    const std::string own = "backends." + out.name + ".kv_cache.dtype";
    for (size_t at = 0; !out.name.empty() && (at = reason.find(shared, at)) != std::string::npos;
         at += own.size()) {
      reason.replace(at, shared.size(), own);
    }
    return reason;
  };
  // attempt() adds its own ": ".
  const std::string where = prefix.empty() ? "" : prefix.substr(0, prefix.size() - 2);
  std::vector<std::string> kv_reasons;
  problems.attempt(where, [&] {
    kv_reasons = check_kv_storage(backend, host, out.kv_cache, config.kv_cache.options).reasons;
    if (out.window_cache.n_layers == 0) return;
    for (std::string& reason :
         check_kv_storage(backend, host, out.window_cache, config.kv_cache.options).reasons) {
      if (std::find(kv_reasons.begin(), kv_reasons.end(), reason) == kv_reasons.end())
        kv_reasons.push_back(std::move(reason));
    }
  });
  for (auto& reason : kv_reasons) {
    reason = own_keys(reason);
    problems.add(ErrorKind::kConfig, prefix + "components.kv_cache: " + reason);
  }

  const auto attn_impls = attention_names(backend, host);
  out.attention_impl = config.attention.impl;
  if (out.attention_impl == "default" && !attn_impls.empty())
    out.attention_impl = attn_impls.front();
  problems.attempt(where, [&] {
    auto attention =
        make_model_attention(backend, host, out.attention_impl, h, config.attention.options, false,
                             WindowCache{out.window_cache, nullptr, nullptr});
    Support s = attention->check(out.kv_cache);
    for (const KVCacheSpec* kv : {&out.kv_cache, &out.window_cache}) {
      if (kv->n_layers == 0) continue;
      std::string why = layout_mismatch(backend, host, out.attention_impl, *kv);
      if (!why.empty() && std::find(s.reasons.begin(), s.reasons.end(), why) == s.reasons.end())
        s.reasons.push_back(std::move(why));
    }
    for (std::string reason : s.reasons) {
      reason = own_keys(reason);
      // An attention that reads what its backend's cache stores repeats
      // the cache's own reasons: each is reported once.
      if (std::find(kv_reasons.begin(), kv_reasons.end(), reason) != kv_reasons.end()) continue;
      problems.add(ErrorKind::kConfig, prefix + "attention '" + out.attention_impl +
                                           "' cannot use this KV cache: " + reason);
    }
  });
}

// Whether each device has room for what is placed on it: the weights (once
// per device whose memory the host maps — the backends share the file's
// pages — and once per backend on any other device) and each backend's KV
// cache. A device that does not report its free memory is not checked.
void check_memory(const std::vector<std::shared_ptr<Backend>>& backends,
                  const std::vector<BackendPlacement>& placements, uint64_t weights_bytes,
                  const std::string& src, Problems& problems) {
  struct Need {
    Device* device;
    uint64_t bytes = 0;
    std::string parts;
  };
  std::vector<Need> needs;
  for (size_t i = 0; i < backends.size(); ++i) {
    Device& d = backends[i]->device();
    auto it = std::find_if(needs.begin(), needs.end(),
                           [&](const Need& n) { return n.device->name() == d.name(); });
    const bool first = it == needs.end();
    if (first) it = needs.insert(needs.end(), Need{&d, 0, ""});
    const std::string who = placements[i].name.empty() ? placements[i].backend : placements[i].name;
    if (first || !d.host_accessible()) {
      it->bytes += weights_bytes;
      it->parts +=
          (it->parts.empty() ? "" : " + ") + format_bytes(weights_bytes) + " weights (" + who + ")";
    }
    it->bytes += placements[i].kv_cache_bytes;
    it->parts += " + " + format_bytes(placements[i].kv_cache_bytes) + " KV cache (" + who + ")";
  }
  for (const Need& n : needs) {
    const uint64_t free_bytes = n.device->memory().free_bytes;
    if (free_bytes == 0 || n.bytes <= free_bytes) continue;
    problems.add(ErrorKind::kOutOfMemory,
                 src + ": device " + n.device->name() + " needs " + format_bytes(n.bytes) + " (" +
                     n.parts + ") but has " + format_bytes(free_bytes) +
                     " free; lower components.kv_cache.capacity_tokens, use a smaller KV-cache "
                     "dtype, or place fewer stages on it");
  }
}

// `backend.plugin: [A, B, ...]`: the first candidate with no problem is
// used; the reasons the others were passed over go to out.backends_passed_over.
// Options a backend's factory (or an attention's or storage's) rejects are
// the pipeline's problem, not a reason to pass over the backend. No candidate left is one kPlugin
// problem listing each candidate's reasons. Sets out.placements[0] (and its backend object) to the
// one chosen.
void choose_backend(const PipelineConfig& config, const PluginHost& host, bool with_model,
                    PipelineCheck& out, std::vector<std::shared_ptr<Backend>>& chosen,
                    Problems& problems) {
  const std::string src = config.source.string();
  std::string names;
  for (const BackendCandidate& c : config.backend.choice)
    names += (names.empty() ? "" : ", ") + c.plugin;
  for (const BackendCandidate& candidate : config.backend.choice) {
    Problems own;
    std::shared_ptr<Backend> backend;
    own.attempt("", [&] { backend = host.create_backend(candidate.plugin, candidate.options); });
    if (!own.empty() && own.kind() == ErrorKind::kConfig) {
      problems.add(ErrorKind::kConfig, src + ": " + own.lines().front());
      return;
    }
    if (backend && !with_model) return;  // the model's own problem is reported already
    BackendPlacement p{"",           candidate.plugin, candidate.options,  "",
                       out.kv_cache, out.window_cache, out.kv_cache_bytes, nullptr};
    if (backend) check_backend(*backend, host, config, "", out.hparams, p, own);
    if (own.empty()) {
      out.placements = {p};
      chosen = {backend};
      return;
    }
    // Options an attention's or a storage's factory rejects (each error
    // names its key path) are as much the pipeline's problem as a backend's.
    for (const std::string& line : own.lines()) {
      for (const Options* options : {&config.attention.options, &config.kv_cache.options}) {
        if (line.rfind(options->path(), 0) == 0) {
          problems.add(ErrorKind::kConfig, src + ": " + line);
          return;
        }
      }
    }
    std::string reason;
    for (const auto& line : own.lines()) reason += (reason.empty() ? "" : "; ") + line;
    out.backends_passed_over.push_back(candidate.plugin + ": " + reason);
  }
  std::string all = src + ": backend.plugin: none of [" + names + "] can run this pipeline here:";
  for (const auto& line : out.backends_passed_over) all += "\n  " + line;
  problems.add(ErrorKind::kPlugin, all);
}

}  // namespace

void load_pipeline_plugins(const PipelineConfig& config, PluginHost& host) {
  host.load_dirs(plugin_search_dirs(config.plugins.paths, config.source.parent_path()));
}

PipelineCheck check_pipeline(const PipelineConfig& config, const PluginHost& host) {
  PipelineCheck out;
  Problems problems;
  const std::string src = config.source.string();

  // Set only when the file opens and its hyperparameters read: every check
  // below that needs the model is skipped otherwise, so a file core cannot
  // run gives one problem, not its consequences too.
  std::optional<GgufFile> model;
  problems.attempt("", [&] {
    GgufFile file = GgufFile::open(config.model.path);
    out.hparams = read_hparams(file);
    model.emplace(std::move(file));
  });

  if (model) {
    const ModelHParams& h = out.hparams;
    const KVCacheConfig& kc = config.kv_cache;
    out.kv_cache = KVCacheSpec{
        kc.impl,
        h.n_layers,
        h.n_kv_heads,
        h.head_dim,
        kc.capacity_tokens,
        kc.block_tokens == 0 ? static_cast<int32_t>(kc.capacity_tokens) : kc.block_tokens,
        kc.dtype};
    plan_window_layers(config, src, out, problems);
    // With `backends:`, each backend's cache is sized below, with its dtype.
    if (config.backends.empty())
      out.kv_cache_bytes = sized_caches(out.kv_cache, out.window_cache,
                                        src + ": components.kv_cache.dtype", problems);
    if (kc.capacity_tokens > h.context_length) {
      problems.add(ErrorKind::kConfig, src + ": components.kv_cache.capacity_tokens " +
                                           std::to_string(kc.capacity_tokens) +
                                           " exceeds the model's context_length " +
                                           std::to_string(h.context_length) + "; use at most " +
                                           std::to_string(h.context_length));
    }
  }

  // The backends stages run on, each checked with its own KV cache.
  std::vector<std::shared_ptr<Backend>> backends;
  if (!config.backends.empty()) {
    for (const NamedBackend& named : config.backends) {
      const bool used = std::any_of(config.stages.begin(), config.stages.end(),
                                    [&](const StageConfig& s) { return s.backend == named.name; });
      if (!used) continue;  // created by no one (a stage list replaced, as perplexity does)
      BackendPlacement p{
          named.name, named.plugin, named.options, "", out.kv_cache, out.window_cache, 0, nullptr};
      if (named.kv_dtype) p.kv_cache.dtype = p.window_cache.dtype = *named.kv_dtype;
      const std::string at = src + ": backends." + named.name;
      if (model) {
        p.kv_cache_bytes = sized_caches(
            p.kv_cache, p.window_cache,
            named.kv_dtype ? at + ".kv_cache.dtype" : src + ": components.kv_cache.dtype",
            problems);
      }
      std::shared_ptr<Backend> backend;
      problems.attempt(at, [&] { backend = host.create_backend(named.plugin, named.options); });
      if (backend && model)
        check_backend(*backend, host, config, at + ": ", out.hparams, p, problems);
      if (backend) backends.push_back(backend);
      out.placements.push_back(std::move(p));
    }
  } else if (config.backend.choice.empty()) {
    BackendPlacement p{"",           config.backend.plugin, config.backend.options, "",
                       out.kv_cache, out.window_cache,      out.kv_cache_bytes,     nullptr};
    std::shared_ptr<Backend> backend;
    problems.attempt(src + ": backend", [&] {
      backend = host.create_backend(config.backend.plugin, config.backend.options);
    });
    if (backend && model)
      check_backend(*backend, host, config, src + ": ", out.hparams, p, problems);
    if (backend) backends.push_back(backend);
    out.placements.push_back(std::move(p));
  } else {
    choose_backend(config, host, model.has_value(), out, backends, problems);
  }
  for (const StageConfig& stage : config.stages) {
    size_t i = 0;
    while (i < out.placements.size() && out.placements[i].name != stage.backend) ++i;
    // No placement at all: no backend of a choice could run (reported).
    if (i == out.placements.size() && !out.placements.empty()) {
      // A config built in code; YAML is checked on reading.
      problems.add(ErrorKind::kConfig, format_source_pos(config.source, stage.pos) + ": stage '" +
                                           stage.name + "' runs on backend '" + stage.backend +
                                           "', which `backends:` does not define");
    }
    if (i == out.placements.size()) i = 0;
    out.stage_placement.push_back(i);
  }
  if (!out.placements.empty()) {
    const BackendPlacement& first =
        out.placements[out.stage_placement.empty() ? 0 : out.stage_placement[0]];
    out.backend = first.backend;
    out.backend_options = first.backend_options;
    out.attention_impl = first.attention_impl;
    out.kv_cache = first.kv_cache;
    out.kv_cache_bytes = first.kv_cache_bytes;
  }
  if (model && problems.empty() && backends.size() == out.placements.size()) {
    std::error_code ec;
    const uint64_t weights = std::filesystem::file_size(config.model.path, ec);
    check_memory(backends, out.placements, ec ? 0 : weights, src, problems);
    for (size_t i = 0; i < backends.size(); ++i) out.placements[i].instance = backends[i];
  }

  for (size_t i = 1; i < config.sampler.chain.size(); ++i) {
    if (config.sampler.chain[i].name == "grammar") {
      problems.add(ErrorKind::kConfig,
                   format_source_pos(config.source, config.sampler.chain[i].pos) +
                       ": the grammar link must come first in components.sampler.chain (it is "
                       "link " +
                       std::to_string(i) +
                       "): links before it could cut away every token the grammar allows");
    }
  }
  for (const auto& link : config.sampler.chain) {
    out.sampler_chain.push_back(link.name);
    problems.attempt(format_source_pos(config.source, link.pos),
                     [&] { host.create_sampler(link.name, link.options); });
  }

  // One engine runs every pipeline (duet/app/scheduler.h): core's prefill
  // stage, then at most one decode-loop stage it can step.
  std::string names;
  for (const auto& stage : config.stages) names += (names.empty() ? "" : ", ") + stage.name;
  if (config.stages.empty()) {
    problems.add(ErrorKind::kConfig,
                 "stages: a pipeline needs at least core's prefill stage; add '- prefill: {}'");
  } else if (config.stages.front().name == "decode") {
    problems.add(ErrorKind::kConfig,
                 format_source_pos(config.source, config.stages.front().pos) +
                     ": the decode stage needs logits from a stage before it; put "
                     "'- prefill: {}' first");
  } else if (!config.stages.empty() &&
             (config.stages.front().name != "prefill" || config.stages.size() > 2)) {
    problems.add(ErrorKind::kConfig,
                 format_source_pos(config.source, config.stages.front().pos) +
                     ": stages are core's prefill, then at most one decode-loop stage (decode, "
                     "or a plugin's such as lookup_decode), and this pipeline's are [" +
                     names + "]; start with '- prefill: {}' and keep one stage after it");
  }
  for (size_t i = 0; i < config.stages.size(); ++i) {
    const StageConfig& stage = config.stages[i];
    out.stages.push_back(stage.name);
    problems.attempt(format_source_pos(config.source, stage.pos), [&] {
      if (stage.name == "prefill") {
        if (i > 0) {
          throw Error(ErrorKind::kConfig,
                      "the prefill stage comes first; it is stages[" + std::to_string(i) + "]");
        }
        parse_prefill_options(stage);
      } else if (stage.name == "decode") {
        parse_decode_options(stage);
      } else {
        // A plugin's factory sees scalar options only (duet/plugin.h).
        for (const auto& [key, values] : stage.lists) {
          throw Error(ErrorKind::kConfig,
                      stage.options.path() + "." + key + ": stage '" + stage.name +
                          "' comes from a plugin, whose options are single values, not lists; "
                          "give one value");
        }
        check_plugin_stage(host, stage.name);
        host.create_stage(stage.name, stage.options);
      }
    });
  }

  problems.throw_if_any();
  return out;
}

}  // namespace duet
