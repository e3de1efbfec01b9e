#include "duet/app/experiment.h"

#include <algorithm>
#include <set>

#include "config/yaml_override.h"
#include "config/yaml_schema.h"
#include "duet/app/pipeline_config.h"
#include "duet/error.h"

namespace duet {
namespace {

namespace fs = std::filesystem;
using yaml::Entry;
using yaml::get;
using yaml::item_path;
using yaml::Node;
using yaml::Problems;

constexpr int32_t kMaxTestTokens = 65536;

bool valid_name(const std::string& name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) ||
           std::string_view("._+=,-").find(c) != std::string_view::npos;
  });
}

// A node as a --set value: scalars double-quoted (so that any text stays
// text), lists and maps in flow style.
std::string as_override_value(const Node& node) {
  switch (node.kind) {
    case Node::Kind::kNull:
      return "null";
    case Node::Kind::kScalar:
      return yaml_quoted(node.scalar);
    case Node::Kind::kList: {
      std::string out = "[";
      for (size_t i = 0; i < node.items.size(); ++i)
        out += (i ? ", " : "") + as_override_value(node.items[i]);
      return out + "]";
    }
    case Node::Kind::kMap: {
      std::string out = "{";
      for (size_t i = 0; i < node.entries.size(); ++i) {
        out += (i ? ", " : "") +
               as_override_value(Node{Node::Kind::kScalar, {}, node.entries[i].key, {}, {}}) +
               ": " + as_override_value(node.entries[i].value);
      }
      return out + "}";
    }
  }
  return "null";
}

// A matrix value as part of a variant's name: its characters outside the
// name alphabet become '_'.
std::string name_part(const std::string& value) {
  std::string out = value;
  for (char& c : out) {
    if (!valid_name(std::string(1, c))) c = '_';
  }
  return out;
}

class ExperimentReader : yaml::SchemaReader {
 public:
  using SchemaReader::SchemaReader;

  Experiment read(const Node& root) {
    Experiment e;
    if (!expect_map(root, "", {"pipeline", "baseline", "variants", "matrix", "workload"})) return e;
    if (const Node* pipeline = required(root, "", "pipeline")) {
      std::string text;
      if (read_string(*pipeline, "pipeline", text)) {
        if (text.empty()) {
          type_error(*pipeline, "pipeline", "the path of a pipeline YAML file");
        } else {
          e.pipeline = resolve(*pipeline, text);
          std::error_code ec;
          if (!fs::is_regular_file(e.pipeline, ec)) {
            report(pipeline->origin, "pipeline",
                   "no pipeline file at " + e.pipeline.string() +
                       " (relative paths are taken from the experiment's folder)");
          }
        }
      }
    }
    if (const Node* variants = get(root, "variants")) read_variants(*variants, e.variants);
    if (const Node* matrix = get(root, "matrix")) read_matrix(*matrix, e.variants);
    if (get(root, "variants") == nullptr && get(root, "matrix") == nullptr) {
      report(root.origin, "",
             "missing required key 'variants' (or 'matrix'): name the variants to compare");
    }
    check_names(e.variants);
    if (const Node* baseline = required(root, "", "baseline")) read_baseline(*baseline, e);
    if (const Node* workload = required(root, "", "workload")) read_workload(*workload, e);
    return e;
  }

 private:
  // `set: {key.path: value, ...}` as overrides.
  void read_set(const Node& node, const std::string& path, std::vector<std::string>& out) {
    if (node.is_null()) return;
    if (!node.is_map()) {
      type_error(node, path,
                 "a map from pipeline key paths to values, e.g. {backend.plugin: onednn}");
      return;
    }
    for (const Entry& e : node.entries) {
      if (e.key.empty() || e.key.front() == '.' || e.key.back() == '.') {
        problems_.add(e.key_origin, path + ": '" + e.key +
                                        "' is not a key path such as components.kv_cache.dtype");
        continue;
      }
      // `backend: ~` drops the base's one backend, for a variant that
      // places its stages on `backends:`; any other key needs a value.
      if (e.value.is_null() && e.key != "backend") {
        report(e.value.origin, path + "." + e.key, "needs a value");
        continue;
      }
      out.push_back(e.key + "=" + as_override_value(e.value));
    }
  }

  void read_variants(const Node& node, std::vector<Variant>& out) {
    if (!node.is_list() || node.items.empty()) {
      type_error(node, "variants", "a non-empty list of {name, set} maps");
      return;
    }
    for (size_t i = 0; i < node.items.size(); ++i) {
      const Node& item = node.items[i];
      const std::string path = item_path("variants", i);
      if (!expect_map(item, path, {"name", "set"})) continue;
      Variant v;
      if (const Node* name = required(item, path, "name")) read_name(*name, path + ".name", v.name);
      if (const Node* set = get(item, "set")) read_set(*set, path + ".set", v.overrides);
      out.push_back(std::move(v));
      origins_.push_back(item.origin);
    }
  }

  // `matrix: {key.path: [a, b], ...}`: one variant per combination, the
  // first key varying slowest, named after the keys that vary.
  void read_matrix(const Node& node, std::vector<Variant>& out) {
    if (!node.is_map() || node.entries.empty()) {
      type_error(node, "matrix", "a map from pipeline key paths to lists of values");
      return;
    }
    std::vector<std::pair<std::string, std::vector<std::string>>> axes;
    size_t combinations = 1;
    for (const Entry& e : node.entries) {
      const std::string path = "matrix." + e.key;
      if (!e.value.is_list() || e.value.items.empty()) {
        type_error(e.value, path, "a non-empty list of values");
        return;
      }
      std::vector<std::string> values;
      for (size_t i = 0; i < e.value.items.size(); ++i) {
        if (!e.value.items[i].is_scalar()) {
          type_error(e.value.items[i], item_path(path, i),
                     "a single value (lists and maps go in variants)");
          return;
        }
        values.push_back(e.value.items[i].scalar);
      }
      combinations *= values.size();
      if (combinations > kMaxVariants) {
        report(e.value.origin, path,
               "the matrix has more than " + std::to_string(kMaxVariants) +
                   " combinations; split the experiment or drop values");
        return;
      }
      axes.emplace_back(e.key, std::move(values));
    }
    for (size_t n = 0; n < combinations; ++n) {
      Variant v;
      size_t rest = n, stride = combinations;
      for (const auto& [key, values] : axes) {
        stride /= values.size();
        const std::string& value = values[rest / stride];
        rest %= stride;
        v.overrides.push_back(key + "=" +
                              as_override_value(Node{Node::Kind::kScalar, {}, value, {}, {}}));
        if (values.size() > 1) {
          const std::string label = key.substr(key.rfind('.') + 1);
          v.name += (v.name.empty() ? "" : ",") + label + "=" + name_part(value);
        }
      }
      if (v.name.empty()) v.name = "matrix";
      out.push_back(std::move(v));
      origins_.push_back(node.origin);
    }
  }

  void check_names(const std::vector<Variant>& variants) {
    std::set<std::string> seen;
    for (size_t i = 0; i < variants.size(); ++i) {
      const Variant& v = variants[i];
      if (v.name.empty()) continue;  // reported where it was read
      if (!valid_name(v.name)) {
        report(origins_[i], "variants",
               "name '" + v.name + "' may hold only letters, digits and ._+=,- ; rename it");
      } else if (!seen.insert(v.name).second) {
        report(origins_[i], "variants",
               "two variants are named '" + v.name + "'; give each a name of its own");
      }
    }
    if (variants.size() > kMaxVariants) {
      problems_.add({}, "variants: " + std::to_string(variants.size()) +
                            " variants, more than the limit of " + std::to_string(kMaxVariants) +
                            "; split the experiment");
    }
  }

  void read_baseline(const Node& node, Experiment& e) {
    read_name(node, "baseline", e.baseline);
    if (e.baseline.empty()) return;
    std::vector<std::string> names;
    for (const Variant& v : e.variants) names.push_back(v.name);
    if (std::find(names.begin(), names.end(), e.baseline) == names.end()) {
      std::string hint = did_you_mean(e.baseline, names);
      report(node.origin, "baseline",
             "'" + e.baseline + "' is not a variant's name" +
                 (hint.empty() ? "; variants: " + quoted_list(names) : hint));
    }
  }

  // A list of integers in [min, max], or one integer.
  void read_sizes(const Node& node, const std::string& path, int32_t min,
                  std::vector<int32_t>& out) {
    out.clear();
    if (node.is_scalar()) {
      int32_t value = 0;
      if (read_integer<int32_t>(node, path, min, kMaxTestTokens, value)) out.push_back(value);
      return;
    }
    if (!node.is_list() || node.items.empty()) {
      type_error(node, path, "an integer or a non-empty list of them");
      return;
    }
    for (size_t i = 0; i < node.items.size(); ++i) {
      int32_t value = 0;
      if (read_integer<int32_t>(node.items[i], item_path(path, i), min, kMaxTestTokens, value))
        out.push_back(value);
    }
  }

  void read_workload(const Node& node, Experiment& e) {
    if (!expect_map(node, "workload", {"speed", "fidelity", "greedy"})) return;
    if (node.entries.empty()) {
      report(node.origin, "workload", "is empty; give at least one of speed, fidelity, greedy");
    }
    if (const Node* speed = get(node, "speed");
        speed &&
        expect_map(*speed, "workload.speed", {"prompt_tokens", "gen_tokens", "depths", "rounds"})) {
      const std::string p = "workload.speed";
      if (const Node* n = get(*speed, "prompt_tokens"))
        read_sizes(*n, p + ".prompt_tokens", 1, e.speed.prompt_tokens);
      if (const Node* n = get(*speed, "gen_tokens"))
        read_sizes(*n, p + ".gen_tokens", 1, e.speed.gen_tokens);
      if (const Node* n = get(*speed, "depths")) read_sizes(*n, p + ".depths", 0, e.speed.depths);
      if (const Node* n = get(*speed, "rounds"))
        read_integer<int32_t>(*n, p + ".rounds", 1, 100, e.speed.rounds);
      if (get(*speed, "prompt_tokens") == nullptr && get(*speed, "gen_tokens") == nullptr) {
        report(speed->origin, p, "names no test; give prompt_tokens, gen_tokens or both");
      }
      if (e.speed.depths.empty()) e.speed.depths = {0};
    }
    if (const Node* fidelity = get(node, "fidelity");
        fidelity && expect_map(*fidelity, "workload.fidelity", {"text", "ctx"})) {
      if (const Node* text = required(*fidelity, "workload.fidelity", "text")) {
        std::string value;
        if (read_string(*text, "workload.fidelity.text", value) && !value.empty()) {
          e.fidelity.text = resolve(*text, value);
          std::error_code ec;
          if (!fs::is_regular_file(e.fidelity.text, ec)) {
            report(text->origin, "workload.fidelity.text",
                   "no text file at " + e.fidelity.text.string());
          }
        }
      }
      if (const Node* ctx = get(*fidelity, "ctx")) {
        if (read_integer<int32_t>(*ctx, "workload.fidelity.ctx", 0, kMaxTestTokens,
                                  e.fidelity.ctx) &&
            e.fidelity.ctx > 0 && e.fidelity.ctx < 4) {
          report(ctx->origin, "workload.fidelity.ctx", "must be 0 (the whole text) or at least 4");
        }
      }
    }
    if (const Node* greedy = get(node, "greedy");
        greedy && expect_map(*greedy, "workload.greedy", {"prompts", "tokens"})) {
      if (const Node* prompts = required(*greedy, "workload.greedy", "prompts")) {
        if (!prompts->is_list() || prompts->items.empty()) {
          type_error(*prompts, "workload.greedy.prompts", "a non-empty list of prompts");
        } else {
          for (size_t i = 0; i < prompts->items.size(); ++i) {
            std::string text;
            const std::string path = item_path("workload.greedy.prompts", i);
            if (!read_string(prompts->items[i], path, text)) continue;
            if (text.empty()) {
              type_error(prompts->items[i], path, "a prompt");
            } else {
              e.greedy.prompts.push_back(text);
            }
          }
        }
      }
      if (const Node* tokens = get(*greedy, "tokens")) {
        read_integer<int32_t>(*tokens, "workload.greedy.tokens", 1, 4096, e.greedy.tokens);
      }
    }
  }

  std::vector<yaml::Origin> origins_;  // where each variant was written
};

}  // namespace

Experiment parse_experiment(std::string_view yaml_text, const std::string& source_name,
                            const fs::path& base_dir, const std::vector<std::string>& overrides) {
  if (yaml_text.size() > kMaxExperimentFileBytes) {
    throw yaml::too_large(source_name, "experiment file", yaml_text.size(),
                          kMaxExperimentFileBytes);
  }
  Problems problems(source_name, overrides);
  std::optional<Node> root = yaml::parse(yaml_text, -1, problems);
  if (!root) problems.throw_if_any();
  yaml::apply_overrides(*root, overrides, problems);
  Experiment e = ExperimentReader(problems, base_dir).read(*root);
  problems.throw_if_any();
  e.source = source_name;
  // Every variant must make a valid pipeline file of the base (its
  // plugins, model and backends are checked when it runs).
  std::string variant_problems;
  for (Variant& v : e.variants) {
    try {
      const PipelineConfig config = load_pipeline_config(e.pipeline, v.overrides);
      const auto decode = std::find_if(config.stages.begin(), config.stages.end(),
                                       [](const StageConfig& s) { return s.name == "decode"; });
      if (decode != config.stages.end()) {
        v.decode_stage = static_cast<int32_t>(decode - config.stages.begin());
      } else if (!e.greedy.prompts.empty()) {
        throw Error(ErrorKind::kConfig,
                    "workload.greedy needs a decode stage in the pipeline; add "
                    "'- decode: {}' to its stages or drop workload.greedy");
      }
    } catch (const Error& err) {
      std::string lines = err.what();
      for (size_t at = 0, end = 0; at < lines.size(); at = end + 1) {
        end = lines.find('\n', at);
        if (end == std::string::npos) end = lines.size();
        variant_problems += (variant_problems.empty() ? "" : "\n") + source_name + ": variant '" +
                            v.name + "': " + lines.substr(at, end - at);
      }
    }
  }
  if (!variant_problems.empty()) throw Error(ErrorKind::kConfig, variant_problems);
  return e;
}

Experiment load_experiment(const fs::path& file, const std::vector<std::string>& overrides) {
  const std::string text = yaml::read_file(file, "experiment file", kMaxExperimentFileBytes);
  Experiment e = parse_experiment(text, file.string(), file.parent_path(), overrides);
  e.source = file;
  return e;
}

}  // namespace duet
