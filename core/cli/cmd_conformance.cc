// duet conformance — the SDK's conformance kit: runs a third party's
// plugin components against the reference and prints a pass/fail table.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "cli_options.h"
#include "conformance_cases.h"
#include "duet/app/plugin_host.h"
#include "duet/error.h"
#include "pipeline_loading.h"
#include "subcommands.h"

namespace duet::cli {

int cmd_conformance(const std::vector<std::string>& args) {
  po::options_description opts("Options");
  opts.add_options()("help,h", "show this help")("plugin",
                                                 po::value<std::string>()->value_name("FILE"),
                                                 "the plugin library to check (duet-NAME.so)")(
      "component", po::value<std::string>()->value_name("NAME"),
      "check only this component of the plugin")(
      "option,o", po::value<std::vector<std::string>>()->composing()->value_name("KEY=VALUE"),
      "an option every component is made with (repeatable), e.g. --option window=4096");
  po::variables_map vm;
  if (!parse_command_line(
          "conformance",
          "duet conformance --plugin FILE [--component NAME] [--option KEY=VALUE]...", opts, {},
          args, vm)) {
    return 0;
  }
  if (!vm.count("plugin")) {
    throw Error(ErrorKind::kUsage,
                "duet conformance: give the plugin to check: --plugin build/duet-NAME.so");
  }
  const std::filesystem::path file = vm["plugin"].as<std::string>();
  PluginHost& host = cli_plugin_host();
  // The file first, so that its plugin is the one checked even where a
  // plugin of the same name sits in the search path.
  const PluginRecord record = host.load(file);
  if (!record.loaded) {
    throw Error(ErrorKind::kPlugin, file.string() + ": refused: " + record.refusal);
  }
  std::error_code ec;
  host.load_dirs(plugin_search_dirs({}, std::filesystem::current_path(ec)));
  if (!host.has(ComponentKind::kBackend, "reference")) {
    throw Error(ErrorKind::kPlugin,
                "duet conformance compares with the reference backend, which is not loaded; "
                "check `duet plugins`");
  }
  const std::string only = vm.count("component") ? vm["component"].as<std::string>() : "";
  Options options("--option");
  if (vm.count("option")) {
    for (const std::string& kv : vm["option"].as<std::vector<std::string>>()) {
      const size_t eq = kv.find('=');
      if (eq == std::string::npos || eq == 0) {
        throw Error(ErrorKind::kUsage, "duet conformance: --option '" + kv +
                                           "': expected KEY=VALUE, e.g. --option window=4096");
      }
      options.set(kv.substr(0, eq), kv.substr(eq + 1));
    }
  }
  std::vector<ConformanceCase> cases;
  bool found = false;
  for (const ComponentInfo& info : record.components) {
    if (!only.empty() && info.name != only) continue;
    found = found || !only.empty();
    ConformanceCase skipped;
    skipped.component = std::string(component_kind_name(info.kind)) + " '" + info.name + "'";
    skipped.backend = info.backend.empty() ? "-" : info.backend;
    skipped.layout = "-";
    skipped.result = "skip";
    try {
      switch (info.kind) {
        case ComponentKind::kAttention:
          for (ConformanceCase& c : attention_conformance(host, info, options))
            cases.push_back(std::move(c));
          continue;
        case ComponentKind::kKVCache:
          for (ConformanceCase& c : kv_cache_conformance(host, info, options))
            cases.push_back(std::move(c));
          continue;
        case ComponentKind::kSampler:
          cases.push_back(sampler_conformance(host, info, options));
          continue;
        default:
          skipped.detail = "the kit checks attention, KV-cache storage and samplers only so far";
      }
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kConfig) throw;
      // Its factory wants options: one component at a time takes them.
      skipped.detail = std::string(e.what()) + " (check it alone: --component " + info.name +
                       " --option KEY=VALUE)";
    }
    cases.push_back(skipped);
  }
  if (!only.empty() && !found) {
    std::string names;
    for (const ComponentInfo& info : record.components) names += " '" + info.name + "'";
    throw Error(ErrorKind::kUsage, "duet conformance: plugin '" + record.name +
                                       "' has no component '" + only + "'; it has:" + names);
  }

  std::cout << "plugin " << record.name << " " << record.version << " (" << file.string() << ")\n";
  std::printf("%-36s %-10s %-16s %12s %8s  %s\n", "component", "backend", "cache", "worst nmse",
              "bound", "result");
  int failed = 0, passed = 0;
  for (const ConformanceCase& c : cases) {
    char worst[32] = "-", bound[32] = "-";
    if (c.result != "skip" && !std::isnan(c.worst_nmse))
      std::snprintf(worst, sizeof worst, "%.2e", c.worst_nmse);
    if (c.bound > 0) std::snprintf(bound, sizeof bound, "%.0e", c.bound);
    std::printf("%-36s %-10s %-16s %12s %8s  %s%s%s\n", c.component.c_str(), c.backend.c_str(),
                c.layout.c_str(), worst, bound, c.result.c_str(), c.detail.empty() ? "" : ": ",
                c.detail.c_str());
    failed += c.result == "FAIL" ? 1 : 0;
    passed += c.result == "pass" ? 1 : 0;
  }
  std::cout << cases.size() << " cases: " << passed << " pass, " << failed << " FAIL, "
            << cases.size() - static_cast<size_t>(passed + failed) << " skipped\n";
  std::cout.flush();
  if (failed > 0) {
    throw Error(ErrorKind::kPlugin, "duet conformance: " + std::to_string(failed) + " of " +
                                        std::to_string(cases.size()) + " cases of plugin '" +
                                        record.name + "' failed");
  }
  return 0;
}

}  // namespace duet::cli
