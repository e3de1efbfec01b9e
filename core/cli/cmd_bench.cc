// duet bench — the command line of the benchmark: its options, the checks
// of the tests they ask for, and the report's context. The tests themselves
// run in core/bench (bench_tests.h, bench_batch.h).
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "bench_batch.h"
#include "bench_context.h"
#include "bench_system.h"
#include "bench_tests.h"
#include "duet/app/pipeline.h"
#include "duet/error.h"
#include "pipeline_loading.h"
#include "subcommands.h"

namespace duet::cli {
namespace {

constexpr const char* kSynopsis =
    "duet bench PIPELINE.yaml|MODEL.gguf [-p N[,N...]] [-n N[,N...]] [-r R] [--warmup W] [--depth "
    "D[,D...]] "
    "[--tests pp,tg] [--batch N[,N...]] [--interleave] [-o table|json|csv] "
    "[--set key.path=value]...";

// The largest token count a test may ask for: the KV cache's own limit.
constexpr int64_t kMaxTokens = 16777216;

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

[[noreturn]] void usage_error(const std::string& what) {
  throw Error(ErrorKind::kUsage, "duet bench: " + what + "; see 'duet bench --help'");
}

// One integer in [min, kMaxTokens]; `flag` names the option in errors.
int64_t parse_count(const std::string& flag, const std::string& text, int64_t min) {
  int64_t v = 0;
  const char* first = text.data();
  const char* last = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(first, last, v);
  const char* what = min > 0 ? "a positive integer" : "a non-negative integer";
  if (text.empty() || ec == std::errc::invalid_argument || ptr != last) {
    usage_error(flag + ": '" + text + "' is not " + what);
  }
  if (ec == std::errc::result_out_of_range || v > kMaxTokens) {
    usage_error(flag + ": '" + text + "' is too large (at most " + std::to_string(kMaxTokens) +
                ")");
  }
  if (v < min) usage_error(flag + ": '" + text + "' is not " + what);
  return v;
}

// Comma-separated counts from every occurrence of a flag, in order.
std::vector<int64_t> parse_counts(const po::variables_map& vm, const std::string& name,
                                  const std::string& flag, int64_t fallback, int64_t min) {
  if (!vm.count(name)) return {fallback};
  std::vector<int64_t> out;
  for (const auto& arg : vm[name].as<std::vector<std::string>>()) {
    size_t start = 0;
    while (true) {
      const size_t comma = arg.find(',', start);
      out.push_back(parse_count(
          flag, arg.substr(start, comma == std::string::npos ? std::string::npos : comma - start),
          min));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  return out;
}

}  // namespace

int cmd_bench(const std::vector<std::string>& args) {
  po::options_description opts("Options");
  opts.add_options()("help,h", "show this help")("prompt-tokens,p",
                                                 po::value<std::vector<std::string>>()->composing(),
                                                 "pp tests: prompt lengths N[,N...] (default 512)")(
      "gen-tokens,n", po::value<std::vector<std::string>>()->composing(),
      "tg tests: generated tokens N[,N...] (default 128)")(
      "repetitions,r", po::value<std::string>(), "timed runs of each test (default 5)")(
      "warmup", po::value<std::string>(),
      "untimed runs before each test's repetitions (default 1)")(
      "depth,d", po::value<std::vector<std::string>>()->composing(),
      "tokens already in the KV cache before a tg test's timed steps, D[,D...] (default 0)")(
      "tests", po::value<std::string>(),
      "which kinds of test to run: pp, tg or pp,tg (default pp,tg)")(
      "interleave",
      "run the tests in rounds, each test once per round, instead of one test's runs after "
      "another's: ratios between tests (depths, prompt lengths) then see the same machine")(
      "batch,b", po::value<std::vector<std::string>>()->composing(),
      "instead of pp and tg tests: N[,N...] sequences decoding at once through the batching "
      "scheduler, each with a -p token prompt (default 32) generating -n tokens (default 64)")(
      "output,o", po::value<std::string>(), "table (default), json or csv");
  add_pipeline_options(opts);
  po::variables_map vm;
  if (!parse_command_line("bench", kSynopsis, opts, {"pipeline"}, args, vm)) return 0;

  const bool batch = vm.count("batch") != 0;
  if (batch && (vm.count("depth") || vm.count("tests"))) {
    usage_error(std::string(vm.count("depth") ? "--depth" : "--tests") +
                " does not go with --batch, whose tests are set by --batch, -p and -n");
  }
  const auto pp_sizes = parse_counts(vm, "prompt-tokens", "--prompt-tokens", batch ? 32 : 512, 1);
  const auto tg_sizes = parse_counts(vm, "gen-tokens", "--gen-tokens", batch ? 64 : 128, 1);
  const auto depths = parse_counts(vm, "depth", "--depth", 0, 0);
  const int64_t repetitions =
      vm.count("repetitions") ? parse_count("--repetitions", vm["repetitions"].as<std::string>(), 1)
                              : 5;
  const int64_t warmup =
      vm.count("warmup") ? parse_count("--warmup", vm["warmup"].as<std::string>(), 0) : 1;
  const std::string output = vm.count("output") ? vm["output"].as<std::string>() : "table";
  if (output != "table" && output != "json" && output != "csv") {
    usage_error("--output: '" + output + "' is not one of table, json, csv");
  }
  bool want_pp = true, want_tg = true;
  if (vm.count("tests")) {
    const std::string t = vm["tests"].as<std::string>();
    if (t == "pp") {
      want_tg = false;
    } else if (t == "tg") {
      want_pp = false;
    } else if (t != "pp,tg" && t != "tg,pp") {
      usage_error("--tests: '" + t + "' is not one of pp, tg, pp,tg");
    }
  }

  std::vector<bench::TestSpec> specs;
  std::vector<bench::BatchTest> batch_tests;
  if (batch) {
    for (int64_t b : parse_counts(vm, "batch", "--batch", 1, 1)) {
      for (int64_t p : pp_sizes) {
        for (int64_t n : tg_sizes) batch_tests.push_back({b, p, n});
      }
    }
    want_pp = want_tg = false;
  }
  if (want_pp) {
    for (int64_t n : pp_sizes) specs.push_back({"pp" + std::to_string(n), "pp", n, 0});
  }
  if (want_tg) {
    for (int64_t d : depths) {
      for (int64_t n : tg_sizes) {
        specs.push_back(
            {"tg" + std::to_string(n) + (d ? "@d" + std::to_string(d) : ""), "tg", n, d});
      }
    }
  }

  PluginHost& host = cli_plugin_host();
  PipelineConfig config = load_pipeline(vm, host);

  if (batch) bench::check_batch_tests(batch_tests, config);
  // The cache must hold the largest test; say which and how to make room.
  const bench::TestSpec* largest = specs.empty() ? nullptr : &specs.front();
  for (const auto& s : specs) {
    if (s.cache_tokens() > largest->cache_tokens()) largest = &s;
  }
  if (largest && largest->cache_tokens() > config.kv_cache.capacity_tokens) {
    int64_t needed = largest->cache_tokens();
    const int64_t block = config.kv_cache.block_tokens;
    if (block > 0) needed = (needed + block - 1) / block * block;
    throw Error(ErrorKind::kConfig,
                "duet bench: " + largest->name + " needs " +
                    std::to_string(largest->cache_tokens()) +
                    " KV-cache tokens but components.kv_cache.capacity_tokens is " +
                    std::to_string(config.kv_cache.capacity_tokens) +
                    "; add --set components.kv_cache.capacity_tokens=" + std::to_string(needed));
  }

  const auto load_start = Clock::now();
  auto pipeline = Pipeline::build(config, host);
  bench::BenchContext c;
  c.load_seconds = seconds_since(load_start);
  c.pipeline = config.source.string();
  c.model = config.model.path.string();
  std::error_code ec;
  c.model_bytes = std::filesystem::file_size(config.model.path, ec);
  if (ec) c.model_bytes = 0;
  const PipelineCheck& check = pipeline->check();
  if (check.placements.size() > 1) {
    // Stages on several backends: "onednn/reference", prefill's first.
    for (size_t i = 0; i < check.stages.size(); ++i) {
      const std::string& name = check.placements[check.stage_placement[i]].backend;
      if (i > 0) {
        c.backend += '/';
        c.plugin_version += '/';
      }
      c.backend += name;
      c.plugin_version += bench::backend_plugin_version(host, name);
    }
    c.backend_summary = placement_line(check);
  } else {
    c.backend = check.backend;
    c.plugin_version = bench::backend_plugin_version(host, c.backend);
    c.backend_summary = bench::backend_summary(host, c.backend);
  }
  const auto& backend_options = pipeline->check().backend_options.values();
  const auto threads = backend_options.find("threads");
  c.threads = threads == backend_options.end() ? "-" : threads->second;
  c.cpu_model = bench::cpu_model_name();
  c.cpu_features = bench::cpu_features();
  c.sampler_order = pipeline->sampler_order();
  c.repetitions = repetitions;
  c.warmup = warmup;
  c.interleave = vm.count("interleave") != 0;
  c.kv_cache_bytes = pipeline->kv_cache_bytes();
  c.kv_cache_tokens = config.kv_cache.capacity_tokens;
  c.kv_cache_dtype = std::string(dtype_name(config.kv_cache.dtype));

  if (batch) {
    std::vector<bench::BatchResult> results(batch_tests.size());
    std::vector<std::string> names;
    for (size_t t = 0; t < batch_tests.size(); ++t) {
      results[t].test = batch_tests[t];
      names.push_back(batch_tests[t].name());
    }
    bench::run_all(names, warmup, repetitions, c.interleave, [&](size_t t, int64_t i) {
      // Every run's prompts are its own, so no run finds another's in the prefix cache.
      const auto stream = static_cast<uint64_t>(t) * static_cast<uint64_t>(warmup + repetitions) +
                          static_cast<uint64_t>(i);
      bench::run_batch_test(*pipeline, batch_tests[t], stream, i >= warmup, results[t]);
      if (i + 1 == warmup + repetitions) results[t].peak_rss_bytes = bench::peak_rss_bytes();
    });
    c.peak_rss_bytes = bench::peak_rss_bytes();
    std::cout << (output == "json"  ? bench::batch_json(c, results)
                  : output == "csv" ? bench::batch_csv(c, results)
                                    : bench::batch_table(c, results));
    return 0;
  }

  const auto results =
      bench::run_tests(*pipeline, config, specs, warmup, repetitions, c.interleave);
  c.peak_rss_bytes = bench::peak_rss_bytes();
  c.device_memory_bytes = pipeline->device_memory_in_use();

  if (output == "json") {
    std::cout << bench::tests_json(c, results);
  } else if (output == "csv") {
    std::cout << bench::tests_csv(c, results);
  } else {
    std::cout << bench::tests_table(c, results);
  }
  return 0;
}

}  // namespace duet::cli
