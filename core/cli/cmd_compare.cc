// duet compare — a backend comparison experiment in one command: every
// variant of an experiment file (duet/app/experiment.h) measured for speed,
// memory and fidelity against a baseline, each in a process of its own.
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "compare_output.h"
#include "compare_run.h"
#include "duet/error.h"
#include "pipeline_loading.h"
#include "subcommands.h"
#include "subprocess.h"

namespace duet::cli {
namespace {

namespace fs = std::filesystem;

std::atomic<bool> g_stop{false};

extern "C" void on_interrupt(int) { g_stop = true; }

// A folder of its own under the system's temporary folder, removed when the
// comparison ends: the baseline's logits go there.
class WorkDir {
 public:
  WorkDir() {
    std::string pattern = (fs::temp_directory_path() / "duet-compare-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) {
      throw Error(ErrorKind::kInternal,
                  "cannot create a temporary folder in " + fs::temp_directory_path().string());
    }
    path_ = pattern;
  }
  ~WorkDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw Error(ErrorKind::kUsage, "--report: cannot write " + path.string());
}

// report_page.py beside the executable's install (share/duet) or in the
// source tree it was built from; DUET_REPORT_SCRIPT overrides both.
std::string report_script() {
  if (const char* env = std::getenv("DUET_REPORT_SCRIPT")) return env;
  const fs::path exe_dir = fs::path(compare::self_executable()).parent_path();
  const fs::path installed = exe_dir / "../share/duet/report_page.py";
  if (fs::exists(installed)) return installed.lexically_normal().string();
  return DUET_SOURCE_DIR "/core/compare/report_page.py";
}

// The Python that draws the report: DUET_PYTHON, else the build tree's venv
// (scripts/python-env.sh), else python3 on the PATH.
std::string report_python() {
  if (const char* env = std::getenv("DUET_PYTHON")) return env;
  const fs::path venv = fs::path(compare::self_executable()).parent_path() / "../venv/bin/python";
  if (fs::exists(venv)) return venv.lexically_normal().string();
  return "python3";
}

void write_report(const fs::path& dir, const Experiment& e, const compare::CompareResult& r) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    throw Error(ErrorKind::kUsage,
                "--report " + dir.string() + ": cannot create the folder: " + ec.message());
  write_file(dir / "compare.json", compare::compare_json(e, r) + "\n");
  write_file(dir / "compare.csv", compare::compare_csv(e, r));
  // From a source tree, its set-up script makes the venv report_python()
  // finds; an installed SDK has no scripts/, only pip.
  const bool source_tree = fs::exists(DUET_SOURCE_DIR "/scripts/python-env.sh");
  const std::string fix =
      std::string("; compare.json and compare.csv are there. ") +
      (source_tree ? "Install the report's Python packages with `bash " DUET_SOURCE_DIR
                     "/scripts/python-env.sh`, or point DUET_PYTHON at a Python with matplotlib"
                   : "Install matplotlib (`python3 -m pip install matplotlib`, in a venv if "
                     "the system Python refuses) and point DUET_PYTHON at that Python");
  compare::ChildResult c;
  try {
    c = compare::run_child({report_python(), report_script(), dir.string()});
  } catch (const Error& spawn_error) {
    throw Error(ErrorKind::kMissingTool,
                "--report " + dir.string() + ": " + spawn_error.what() + fix);
  }
  if (!c.ok()) {
    throw Error(
        ErrorKind::kMissingTool,
        "--report " + dir.string() + ": the charts could not be drawn (" + c.reason() + ")" + fix);
  }
  std::cerr << "compare: report in " << (dir / "report.html").string() << "\n";
}

}  // namespace

int cmd_compare(const std::vector<std::string>& args) {
  po::options_description opts("Options");
  opts.add_options()("help,h", "show this help")(
      "output,o", po::value<std::string>()->default_value("table"), "table, json or csv on stdout")(
      "report", po::value<std::string>(),
      "also write DIR/compare.json, DIR/compare.csv and DIR/report.html (charts; needs "
      "matplotlib)");
  opts.add_options()("set,s", po::value<std::vector<std::string>>()->composing(),
                     "override an experiment key: --set key.path=value (repeatable)");
  po::variables_map vm;
  if (!parse_command_line("compare",
                          "duet compare EXPERIMENT.yaml [-o table|json|csv] [--report DIR] [--set "
                          "key.path=value]...",
                          opts, {"experiment"}, args, vm)) {
    return 0;
  }
  const std::string output = vm["output"].as<std::string>();
  if (output != "table" && output != "json" && output != "csv") {
    throw Error(ErrorKind::kUsage, "--output '" + output + "' is not one of table, json, csv");
  }
  std::vector<std::string> overrides;
  if (vm.count("set")) overrides = vm["set"].as<std::vector<std::string>>();
  const Experiment e = load_experiment(vm["experiment"].as<std::string>(), overrides);

  WorkDir work;
  g_stop = false;
  struct sigaction action {};
  action.sa_handler = on_interrupt;
  action.sa_flags = SA_RESETHAND;  // a second Ctrl-C ends duet compare at once
  sigaction(SIGINT, &action, nullptr);
  std::cerr << "compare: " << e.variants.size() << " variants, baseline " << e.baseline
            << "; each runs in a process of its own (Ctrl-C stops and keeps what was measured)\n";
  const compare::CompareResult r = compare::run_experiment(e, work.path(), g_stop);
  signal(SIGINT, SIG_DFL);

  if (output == "json") {
    std::cout << compare::compare_json(e, r) << "\n";
  } else if (output == "csv") {
    std::cout << compare::compare_csv(e, r);
  } else {
    compare::print_tables(std::cout, e, r);
  }
  if (vm.count("report")) {
    try {
      write_report(vm["report"].as<std::string>(), e, r);
    } catch (const Error& err) {
      if (!r.interrupted) throw;
      std::cerr << "duet: error: " << err.what() << "\n";  // the interrupt's exit code wins
    }
  }
  return r.interrupted ? 130 : 0;
}

}  // namespace duet::cli
