#include "pipeline_loading.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "duet/byte_size.h"
#include "duet/error.h"

namespace duet::cli {

void StdoutSink::on_text(std::string_view text) { std::cout << text << std::flush; }

PluginHost& cli_plugin_host() {
  static PluginHost host;
  static const bool warned = [] {
    for (const std::string& w : plugin_path_warnings()) std::cerr << "duet: warning: " << w << "\n";
    return true;
  }();
  (void)warned;
  return host;
}

void add_pipeline_options(po::options_description& opts) {
  opts.add_options()("set,s", po::value<std::vector<std::string>>()->composing(),
                     "override a pipeline key: --set key.path=value (repeatable)")(
      "save-pipeline", po::value<std::string>()->value_name("FILE.yaml"),
      "with MODEL.gguf: also write the pipeline it builds (--set overrides included) to "
      "FILE.yaml, to edit and run");
}

PipelineConfig load_pipeline(const po::variables_map& vm, PluginHost& host,
                             const std::vector<std::string>& extra) {
  std::vector<std::string> overrides = extra;
  if (vm.count("set")) {
    const auto& set = vm["set"].as<std::vector<std::string>>();
    overrides.insert(overrides.end(), set.begin(), set.end());
  }
  const std::string source = vm["pipeline"].as<std::string>();
  const bool model = is_model_path(source);
  if (vm.count("save-pipeline") && !model) {
    throw Error(ErrorKind::kUsage,
                "--save-pipeline writes the pipeline a MODEL.gguf argument "
                "builds, but '" +
                    source + "' is a pipeline file already; copy it instead");
  }
  PipelineConfig config =
      model ? parse_pipeline_config(default_pipeline_yaml(source), "default pipeline for " + source,
                                    "", overrides)
            : load_pipeline_config(source, overrides);
  if (vm.count("save-pipeline")) {
    const std::string out = vm["save-pipeline"].as<std::string>();
    std::ofstream file(out);
    file << describe(config);
    if (!file.flush()) {
      throw Error(ErrorKind::kUsage, "--save-pipeline: cannot write '" + out +
                                         "'; check that its folder exists and is writable");
    }
    std::cerr << "pipeline written to " << out << "\n";
  }
  load_pipeline_plugins(config, host);
  return config;
}

std::string summarize(const PipelineConfig& config, const PipelineCheck& check) {
  std::ostringstream s;
  const ModelHParams& h = check.hparams;
  s << "model:     " << config.model.path.string() << " (" << h.architecture << ", " << h.n_layers
    << " layers, hidden " << h.n_embd << ", " << h.n_heads << "/" << h.n_kv_heads
    << " heads, vocab " << h.n_vocab << ", context " << h.context_length << ")\n";
  for (size_t at = 0; at < check.placements.size(); ++at) {
    const BackendPlacement& p = check.placements[at];
    if (!p.name.empty()) {
      s << "backends." << p.name << " runs";
      for (size_t i = 0; i < check.stages.size(); ++i) {
        if (check.stage_placement[i] == at) s << " " << check.stages[i];
      }
      s << ":\n  ";
    }
    s << "backend:   " << p.backend << "\n";
    for (const auto& why : check.backends_passed_over)
      s << "           (passed over " << why << ")\n";
    s << (p.name.empty() ? "" : "  ") << "attention: " << p.attention_impl << "\n";
    s << (p.name.empty() ? "" : "  ") << "kv_cache:  " << p.kv_cache.impl << ", "
      << p.kv_cache.capacity_tokens << " tokens in blocks of " << p.kv_cache.block_tokens << ", "
      << dtype_name(p.kv_cache.dtype) << ", " << format_bytes(p.kv_cache_bytes);
    if (p.window_cache.n_layers > 0) {
      s << " (" << p.kv_cache.n_layers << " layers; the " << p.window_cache.n_layers
        << " sliding-window layers in rings of " << check.window_ring_tokens
        << " slots per sequence from a pool of " << p.window_cache.capacity_tokens
        << ", no prefix sharing)";
    }
    s << "\n";
  }
  s << "sampler:   seed " << config.sampler.seed << ", chain [";
  for (size_t i = 0; i < check.sampler_chain.size(); ++i)
    s << (i ? ", " : "") << check.sampler_chain[i];
  s << "]\nstages:    ";
  for (size_t i = 0; i < check.stages.size(); ++i) s << (i ? " -> " : "") << check.stages[i];
  s << "\n";
  return s.str();
}

std::string placement_line(const PipelineCheck& check) {
  if (check.placements.size() < 2) return "";
  std::string line;
  for (size_t i = 0; i < check.stages.size(); ++i) {
    const BackendPlacement& at = check.placements[check.stage_placement[i]];
    line += (i ? ", " : "") + check.stages[i] + " on " + at.name + " (" + at.backend + ", " +
            std::string(dtype_name(at.kv_cache.dtype)) + " cache)";
  }
  return line;
}

}  // namespace duet::cli
