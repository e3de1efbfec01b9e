// describe(): a PipelineConfig written back as YAML (declared in
// duet/app/pipeline_config.h). The output is recorded beside results, so it
// spells out every default and keeps one key order: two runs with equal
// configurations produce byte-identical text.
#include <yaml-cpp/emitter.h>

#include <algorithm>
#include <string>

#include "duet/app/pipeline_config.h"

namespace duet {
namespace {

// A string scalar (or key) that reads back as itself. yaml-cpp's emitter
// writes a string with a control character such as \r plain, and YAML
// readers then drop or fold it (fuzzing found "a\r" coming back as "a"); in
// double quotes it is escaped.
struct Str {
  const std::string& s;
};

YAML::Emitter& operator<<(YAML::Emitter& out, Str str) {
  const bool control = std::any_of(str.s.begin(), str.s.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u < 0x20 || u == 0x7f;
  });
  if (control) out << YAML::DoubleQuoted;
  return out << str.s;
}

// YAML limits an implicit key to 1024 characters, which a key of more than
// 200 bytes may reach once escaped: such keys are written explicitly
// ("? key"), which yaml-cpp reads back only in block maps.
bool is_long_key(const std::string& key) { return key.size() > 200; }

void emit_key(YAML::Emitter& out, const std::string& key) {
  // yaml-cpp writes a key of over 1024 bytes explicitly by itself; told to
  // as well, it keeps writing every later key explicitly, even in flow maps
  // ("{ ?k: v}"), which it cannot read back.
  if (is_long_key(key) && key.size() <= 1024) out << YAML::LongKey;
  out << YAML::Key << Str{key};
}

void emit_options(YAML::Emitter& out, const Options& options,
                  const std::map<std::string, std::vector<std::string>>& lists = {}) {
  const bool long_keys =
      std::any_of(options.values().begin(), options.values().end(),
                  [](const auto& kv) { return is_long_key(kv.first); }) ||
      std::any_of(lists.begin(), lists.end(), [](const auto& kv) { return is_long_key(kv.first); });
  if (!long_keys) out << YAML::Flow;
  out << YAML::BeginMap;
  for (const auto& [key, value] : options.values()) {
    emit_key(out, key);
    out << YAML::Value << Str{value};
  }
  for (const auto& [key, values] : lists) {
    emit_key(out, key);
    out << YAML::Value << YAML::Flow << YAML::BeginSeq;
    for (const auto& v : values) out << Str{v};
    out << YAML::EndSeq;
  }
  out << YAML::EndMap;
}

// `- name: {options}`, the form of sampler links and stages.
void emit_link(YAML::Emitter& out, const std::string& name, const Options& options,
               const std::map<std::string, std::vector<std::string>>& lists = {}) {
  out << YAML::BeginMap;
  emit_key(out, name);
  out << YAML::Value;
  emit_options(out, options, lists);
  out << YAML::EndMap;
}

// A stage, with core's `backend:` key among its options.
void emit_stage(YAML::Emitter& out, const StageConfig& stage) {
  if (stage.backend.empty()) {
    emit_link(out, stage.name, stage.options, stage.lists);
    return;
  }
  Options options = stage.options;
  options.set("backend", stage.backend);
  emit_link(out, stage.name, options, stage.lists);
}

// `backend:`, one backend or a choice.
void emit_backend(YAML::Emitter& out, const BackendConfig& backend) {
  out << YAML::Key << "backend" << YAML::Value << YAML::BeginMap;
  if (backend.choice.empty()) {
    out << YAML::Key << "plugin" << YAML::Value << Str{backend.plugin};
    out << YAML::Key << "options" << YAML::Value;
    emit_options(out, backend.options);
  } else {
    out << YAML::Key << "plugin" << YAML::Value << YAML::Flow << YAML::BeginSeq;
    for (const BackendCandidate& c : backend.choice) out << Str{c.plugin};
    out << YAML::EndSeq;
    out << YAML::Key << "options" << YAML::Value << YAML::BeginMap;
    for (const BackendCandidate& c : backend.choice) {
      out << YAML::Key << Str{c.plugin} << YAML::Value;
      emit_options(out, c.options);
    }
    out << YAML::EndMap;
  }
  out << YAML::EndMap;
}

// `backends:`, the named backends stages are placed on.
void emit_backends(YAML::Emitter& out, const std::vector<NamedBackend>& backends) {
  out << YAML::Key << "backends" << YAML::Value << YAML::BeginMap;
  for (const NamedBackend& b : backends) {
    out << YAML::Key << Str{b.name} << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "plugin" << YAML::Value << Str{b.plugin};
    out << YAML::Key << "options" << YAML::Value;
    emit_options(out, b.options);
    if (b.kv_dtype) {
      out << YAML::Key << "kv_cache" << YAML::Value << YAML::Flow << YAML::BeginMap;
      out << YAML::Key << "dtype" << YAML::Value << std::string(dtype_name(*b.kv_dtype));
      out << YAML::EndMap;
    }
    out << YAML::EndMap;
  }
  out << YAML::EndMap;
}

}  // namespace

std::string describe(const PipelineConfig& config) {
  YAML::Emitter out;
  // A comment cannot escape: control characters of the file name become '?'.
  std::string source = config.source.string();
  std::replace_if(
      source.begin(), source.end(),
      [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }, '?');
  out << YAML::Comment("pipeline from " + source) << YAML::Newline;
  out << YAML::BeginMap;

  out << YAML::Key << "model" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "path" << YAML::Value << Str{config.model.path.string()};
  out << YAML::Key << "chat" << YAML::Value << config.model.chat;
  out << YAML::Key << "system" << YAML::Value << Str{config.model.system_prompt};
  out << YAML::Key << "chat_template" << YAML::Value << Str{config.model.chat_template};
  out << YAML::EndMap;

  out << YAML::Key << "plugins" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "paths" << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (const auto& path : config.plugins.paths) out << Str{path};
  out << YAML::EndSeq;
  out << YAML::EndMap;

  if (config.backends.empty())
    emit_backend(out, config.backend);
  else
    emit_backends(out, config.backends);

  out << YAML::Key << "components" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "attention" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "impl" << YAML::Value << Str{config.attention.impl};
  out << YAML::Key << "options" << YAML::Value;
  emit_options(out, config.attention.options);
  out << YAML::EndMap;
  const KVCacheConfig& kv = config.kv_cache;
  out << YAML::Key << "kv_cache" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "impl" << YAML::Value << Str{kv.impl};
  out << YAML::Key << "capacity_tokens" << YAML::Value << kv.capacity_tokens;
  out << YAML::Key << "block_tokens" << YAML::Value << kv.block_tokens;
  out << YAML::Key << "dtype" << YAML::Value << std::string(dtype_name(kv.dtype));
  out << YAML::Key << "window_layers" << YAML::Value
      << std::string(window_layers_name(kv.window_layers));
  out << YAML::Key << "options" << YAML::Value;
  emit_options(out, kv.options);
  out << YAML::EndMap;
  out << YAML::Key << "sampler" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "seed" << YAML::Value << config.sampler.seed;
  out << YAML::Key << "chain" << YAML::Value;
  if (config.sampler.chain.empty()) out << YAML::Flow;  // "chain: []" on one line
  out << YAML::BeginSeq;
  for (const SamplerLink& link : config.sampler.chain) emit_link(out, link.name, link.options);
  out << YAML::EndSeq << YAML::EndMap;
  out << YAML::EndMap;

  out << YAML::Key << "stages" << YAML::Value << YAML::BeginSeq;
  for (const StageConfig& stage : config.stages) emit_stage(out, stage);
  out << YAML::EndSeq;

  const BatchingConfig& b = config.batching;
  out << YAML::Key << "batching" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "max_sequences" << YAML::Value << b.max_sequences;
  out << YAML::Key << "max_step_tokens" << YAML::Value << b.max_step_tokens;
  out << YAML::Key << "prefix_caching" << YAML::Value << b.prefix_caching;
  out << YAML::Key << "draft_rows" << YAML::Value << b.draft_rows;
  out << YAML::EndMap;
  if (config.debug.check_plugins) {
    out << YAML::Key << "debug" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "check_plugins" << YAML::Value << true;
    out << YAML::EndMap;
  }

  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace duet
