// duet plugins — what the host finds, loads and refuses, and why.
#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "cli_options.h"
#include "duet/app/pipeline_config.h"
#include "duet/app/plugin_host.h"
#include "duet/error.h"
#include "pipeline_loading.h"
#include "subcommands.h"

namespace duet::cli {

namespace {

// Attention and KV-cache storage that plugins add to backends, under the
// backend each serves, with the reason where it cannot serve now.
void print_extensions(const PluginHost& host) {
  std::map<std::string, std::vector<ComponentInfo>> by_backend;
  for (ComponentKind kind : {ComponentKind::kAttention, ComponentKind::kKVCache}) {
    for (const ComponentInfo& info : host.components(kind))
      by_backend[info.backend].push_back(info);
  }
  if (by_backend.empty()) return;
  std::cout << "\nAttention and KV-cache storage added to backends (beside each backend's own):\n";
  for (const auto& [backend, infos] : by_backend) {
    std::cout << "  " << backend << "\n";
    for (const ComponentInfo& info : infos) {
      const std::string why = host.unavailable_reason(info);
      std::cout << "      " << (info.kind == ComponentKind::kAttention ? "attention" : "kv_cache")
                << " " << info.name << " (plugin " << info.plugin << ")"
                << (why.empty() ? "" : "  UNAVAILABLE: " + why) << "\n";
    }
  }
}

}  // namespace

int cmd_plugins(const std::vector<std::string>& args) {
  po::options_description opts("Options");
  opts.add_options()("help,h", "show this help")(
      "verbose,v", "also list the files in the plugin folders that were not tried, and why")(
      "config,c", po::value<std::string>(), "also search the plugins.paths of this pipeline YAML")(
      "plugin-path,p", po::value<std::vector<std::string>>()->composing(),
      "search this folder first (repeatable)");
  po::variables_map vm;
  if (!parse_command_line(
          "plugins", "duet plugins [--config PIPELINE.yaml] [--plugin-path DIR]... [--verbose]",
          opts, {}, args, vm)) {
    return 0;
  }

  std::vector<std::string> paths;
  if (vm.count("plugin-path")) paths = vm["plugin-path"].as<std::vector<std::string>>();
  for (const std::string& p : paths) {
    std::error_code ec;
    if (!std::filesystem::is_directory(p, ec)) {
      throw Error(ErrorKind::kUsage, "duet plugins: --plugin-path '" + p +
                                         "' is not a folder; give the folder that holds the "
                                         "duet-*.so files");
    }
  }
  std::error_code ec;  // a deleted working directory leaves relative paths as written
  std::filesystem::path base = std::filesystem::current_path(ec);
  if (vm.count("config")) {
    PipelineConfig config = load_pipeline_config(vm["config"].as<std::string>());
    base = config.source.parent_path();
    for (auto& p : paths) {
      auto absolute = std::filesystem::absolute(p, ec);
      if (!ec) p = absolute.string();
    }
    paths.insert(paths.end(), config.plugins.paths.begin(), config.plugins.paths.end());
  }

  auto dirs = plugin_search_dirs(paths, base);
  std::cout << "Search path (first match of a name wins):\n";
  for (const auto& d : dirs) std::cout << "  " << d.string() << "\n";
  if (dirs.empty())
    std::cout << "  (no folder exists; set DUET_PLUGIN_PATH or pass --plugin-path)\n";

  PluginHost& host = cli_plugin_host();
  host.load_dirs(dirs);
  std::cout << "\nPlugins:\n";
  for (const auto& r : host.records()) {
    std::cout << "  " << r.name << (r.version.empty() ? "" : " " + r.version) << "  "
              << (r.loaded ? "loaded" : "REFUSED") << "  " << r.path.string() << "\n";
    if (!r.summary.empty()) std::cout << "      " << r.summary << "\n";
    if (!r.loaded) std::cout << "      reason: " << r.refusal << "\n";
    for (const auto& c : r.components) {
      std::cout << "      " << component_kind_name(c.kind) << " " << c.name
                << (c.backend.empty() ? "" : " for backend " + c.backend)
                << (c.summary.empty() ? "" : ": " + c.summary) << "\n";
    }
  }
  if (host.records().empty()) std::cout << "  (none found)\n";
  print_extensions(host);
  if (vm.count("verbose")) {
    std::cout << "\nFiles in the plugin folders not tried:\n";
    for (const SkippedFile& s : host.skipped()) {
      std::cout << "  " << s.path.string() << "\n      " << s.reason << "\n";
    }
    if (host.skipped().empty()) std::cout << "  (none)\n";
  }
  return 0;
}

}  // namespace duet::cli
