// duet conformance — the SDK's conformance kit: runs a third party's
// plugin components against the reference and prints a pass/fail table.
// Each component is checked in a process of its own (this program again,
// with --rows-to), so one that aborts or crashes fails its row instead of
// ending the run.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_options.h"
#include "conformance_cases.h"
#include "duet/app/plugin_host.h"
#include "duet/error.h"
#include "pipeline_loading.h"
#include "stage_conformance.h"
#include "subcommands.h"

extern char** environ;

namespace duet::cli {
namespace {

using nlohmann::json;

// The cases of component `info`, or one "skip" row saying why it has none.
std::vector<ConformanceCase> check_component(const PluginHost& host, const ComponentInfo& info,
                                             const Options& options) {
  ConformanceCase skipped;
  skipped.component = std::string(component_kind_name(info.kind)) + " '" + info.name + "'";
  skipped.backend = info.backend.empty() ? "-" : info.backend;
  skipped.layout = "-";
  skipped.result = "skip";
  try {
    switch (info.kind) {
      case ComponentKind::kAttention:
        return attention_conformance(host, info, options);
      case ComponentKind::kKVCache:
        return kv_cache_conformance(host, info, options);
      case ComponentKind::kSampler:
        if (host.reads_vocabulary(info.name)) {
          host.create_sampler(info.name, options);  // its options, checked
          skipped.detail =
              "it reads the vocabulary (add_vocab_sampler): random candidate rows cannot check "
              "it; test it against a tokenizer of your own, as tests/grammar_test.cc does";
          break;
        }
        return {sampler_conformance(host, info, options)};
      case ComponentKind::kStage:
        return stage_conformance(host, info, options);
      default:
        skipped.detail =
            "the kit checks attention, KV-cache storage, samplers and stages; "
            "a backend is checked by tests/backend_conformance_test.cc";
    }
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kConfig) throw;
    // Its factory wants options: one component at a time takes them.
    skipped.detail = std::string(e.what()) + " (check it alone: --component " + info.name +
                     " --option KEY=VALUE)";
  }
  return {skipped};
}

json to_json(const ConformanceCase& c) {
  return {
      {"component", c.component}, {"backend", c.backend},
      {"layout", c.layout},       {"result", c.result},
      {"detail", c.detail},       {"worst_nmse", std::isnan(c.worst_nmse) ? -1.0 : c.worst_nmse},
      {"bound", c.bound}};
}

ConformanceCase from_json(const json& j) {
  ConformanceCase c;
  c.component = j.at("component").get<std::string>();
  c.backend = j.at("backend").get<std::string>();
  c.layout = j.at("layout").get<std::string>();
  c.result = j.at("result").get<std::string>();
  c.detail = j.at("detail").get<std::string>();
  c.worst_nmse = j.at("worst_nmse").get<double>();
  if (c.worst_nmse < 0) c.worst_nmse = NAN;
  c.bound = j.at("bound").get<double>();
  return c;
}

// --kind's spelling of each kind.
const char* kind_option(ComponentKind kind) {
  switch (kind) {
    case ComponentKind::kAttention:
      return "attention";
    case ComponentKind::kKVCache:
      return "kv_cache";
    case ComponentKind::kSampler:
      return "sampler";
    case ComponentKind::kStage:
      return "stage";
    case ComponentKind::kBackend:
      break;
  }
  return "backend";
}

// A folder only this process writes in, removed with this.
class PrivateDir {
 public:
  PrivateDir() {
    std::string pattern = std::filesystem::temp_directory_path() / "duet-conformance-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) {
      throw Error(ErrorKind::kInternal, "duet conformance: cannot make a temporary folder: " +
                                            std::string(strerror(errno)));
    }
    path_ = pattern;
  }
  ~PrivateDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  PrivateDir(const PrivateDir&) = delete;
  PrivateDir& operator=(const PrivateDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Runs this program again on component `info` alone, its cases written to
// `rows`; a process that dies or fails to write them is one FAIL row.
std::vector<ConformanceCase> check_in_own_process(const std::string& plugin,
                                                  const ComponentInfo& info,
                                                  const std::vector<std::string>& option_args,
                                                  const std::filesystem::path& rows) {
  std::vector<std::string> args = {
      "duet",    "conformance", "--plugin",    plugin,   "--component",
      info.name, "--rows-to",   rows.string(), "--kind", kind_option(info.kind)};
  if (!info.backend.empty()) args.insert(args.end(), {"--backend", info.backend});
  args.insert(args.end(), option_args.begin(), option_args.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::cout.flush();
  pid_t pid = 0;
  if (const int err = posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv.data(), environ);
      err != 0) {
    throw Error(ErrorKind::kInternal,
                "duet conformance: cannot start a checking process: " + std::string(strerror(err)));
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  std::vector<ConformanceCase> cases;
  {
    std::ifstream in(rows);
    for (std::string line; std::getline(in, line);) {
      if (!line.empty()) cases.push_back(from_json(json::parse(line)));
    }
  }
  std::error_code ec;
  std::filesystem::remove(rows, ec);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && !cases.empty()) return cases;
  ConformanceCase c;
  c.component = std::string(component_kind_name(info.kind)) + " '" + info.name + "'";
  c.backend = info.backend.empty() ? "-" : info.backend;
  c.layout = "-";
  c.result = "FAIL";
  c.worst_nmse = NAN;
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = sigabbrev_np(sig);
    c.detail = "the process checking it died of signal " + std::to_string(sig) + " (SIG" +
               (name != nullptr ? name : "?") + ")" +
               (cases.empty() ? "" : " after " + std::to_string(cases.size()) + " case(s)") +
               "; run that case under a debugger: duet conformance --plugin " + plugin +
               " --component " + info.name;
  } else {
    c.detail = "the process checking it exited with code " +
               std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) + " (its error above)";
  }
  cases.push_back(c);
  return cases;
}

}  // namespace

int cmd_conformance(const std::vector<std::string>& args) {
  po::options_description opts("Options");
  opts.add_options()("help,h", "show this help")("plugin",
                                                 po::value<std::string>()->value_name("FILE"),
                                                 "the plugin library to check (duet-NAME.so)")(
      "component", po::value<std::string>()->value_name("NAME"),
      "check only this component of the plugin")(
      "backend", po::value<std::string>()->value_name("NAME"),
      "check only the plugin's components for this backend (attention, KV-cache storage)")(
      "kind", po::value<std::string>()->value_name("KIND"),
      "check only components of this kind: attention, kv_cache, sampler or stage")(
      "option,o", po::value<std::vector<std::string>>()->composing()->value_name("KEY=VALUE"),
      "an option every component is made with (repeatable), e.g. --option window=4096")(
      "rows-to", po::value<std::string>()->value_name("FILE"),
      "check in this process and write the cases to FILE, a JSON object a line (how the kit "
      "runs each component in a process of its own)");
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
  const std::string backend = vm.count("backend") ? vm["backend"].as<std::string>() : "";
  const std::string kind = vm.count("kind") ? vm["kind"].as<std::string>() : "";
  const auto chosen = [&](const ComponentInfo& info) {
    return (only.empty() || info.name == only) && (backend.empty() || info.backend == backend) &&
           (kind.empty() || kind_option(info.kind) == kind);
  };
  Options options("--option");
  std::vector<std::string> option_args;
  if (vm.count("option")) {
    for (const std::string& kv : vm["option"].as<std::vector<std::string>>()) {
      option_args.insert(option_args.end(), {"--option", kv});
      const size_t eq = kv.find('=');
      if (eq == std::string::npos || eq == 0) {
        throw Error(ErrorKind::kUsage, "duet conformance: --option '" + kv +
                                           "': expected KEY=VALUE, e.g. --option window=4096");
      }
      options.set(kv.substr(0, eq), kv.substr(eq + 1));
    }
  }
  if (vm.count("rows-to")) {
    std::ofstream out(vm["rows-to"].as<std::string>());
    for (const ComponentInfo& info : record.components) {
      if (!chosen(info)) continue;
      for (const ConformanceCase& c : check_component(host, info, options))
        out << to_json(c).dump() << "\n" << std::flush;
    }
    if (!out) {
      throw Error(ErrorKind::kUsage,
                  "duet conformance: cannot write " + vm["rows-to"].as<std::string>());
    }
    return 0;
  }
  std::vector<ConformanceCase> cases;
  bool found = false;
  const PrivateDir rows;
  for (size_t i = 0; i < record.components.size(); ++i) {
    const ComponentInfo& info = record.components[i];
    if (!chosen(info)) continue;
    found = true;
    const std::filesystem::path out = rows.path() / ("component-" + std::to_string(i) + ".jsonl");
    for (ConformanceCase& c : check_in_own_process(file.string(), info, option_args, out))
      cases.push_back(std::move(c));
  }
  if (!found && !(only.empty() && backend.empty() && kind.empty())) {
    std::string names;
    for (const ComponentInfo& info : record.components) {
      names += " '" + info.name + "'" + (info.backend.empty() ? "" : " (" + info.backend + ")");
    }
    throw Error(ErrorKind::kUsage,
                "duet conformance: plugin '" + record.name + "' has no component" +
                    (only.empty() ? "" : " '" + only + "'") +
                    (backend.empty() ? "" : " for backend '" + backend + "'") +
                    (kind.empty() ? "" : " of kind '" + kind + "'") + "; it has:" + names);
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
