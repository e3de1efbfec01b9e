// duet bench — prompt-processing and generation throughput of a pipeline, in
// the spirit of llama-bench: pp tests time one forward pass over N prompt
// tokens, tg tests time N decode steps (sample, append, forward one token),
// each repeated after warm-up runs, reported as a table, JSON or CSV.
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "bench_batch.h"
#include "bench_context.h"
#include "bench_stats.h"
#include "bench_system.h"
#include "commands.h"
#include "duet/error.h"
#include "duet/pipeline.h"
#include "json_writer.h"
#include "pipeline_loading.h"

namespace duet::cli {
namespace {

constexpr const char* kSynopsis =
    "duet bench PIPELINE.yaml [-p N[,N...]] [-n N[,N...]] [-r R] [--warmup W] [--depth D[,D...]] "
    "[--tests pp,tg] [--batch N[,N...]] [--interleave] [-o table|json|csv] "
    "[--set key.path=value]...";

// The largest token count a test may ask for: the KV cache's own limit.
constexpr int64_t kMaxTokens = 16777216;
// Untimed prefill of a tg test's depth runs in passes of this many tokens
// when the pipeline's prefill stage sets no chunk_tokens.
constexpr int32_t kDepthChunk = 512;

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

struct TestSpec {
  std::string name;    // pp512, tg128, tg128@d2048
  std::string kind;    // "pp" or "tg"
  int64_t tokens = 0;  // prompt tokens (pp) or generated tokens (tg)
  int64_t depth = 0;   // tokens cached before a tg test's timed steps
  // KV-cache positions the test fills.
  int64_t cache_tokens() const { return kind == "pp" ? tokens : 1 + depth + tokens; }
};

struct TestResult {
  TestSpec spec;
  std::vector<double> tokens_per_second;    // one per repetition
  std::vector<double> first_token_seconds;  // pp tests: prefill + first sample
  BenchSummary tps;
  BenchSummary ttft;
  uint64_t peak_rss_bytes = 0;  // VmHWM after this test's runs
};

// The version of the plugin that registered backend `name`; the core's
// version for a built-in.
std::string backend_plugin_version(const PluginHost& host, const std::string& name) {
  for (const auto& info : host.components(ComponentKind::kBackend)) {
    if (info.name != name) continue;
    if (info.plugin == "core") return DUET_VERSION;
    for (const auto& r : host.records()) {
      if (r.loaded && r.name == info.plugin) return r.version.empty() ? "-" : r.version;
    }
  }
  return "-";
}

// The prefill stage's chunk_tokens (0 = the whole prompt in one pass), so
// that pp tests process a prompt the way the pipeline would.
int64_t prefill_chunk(const PipelineConfig& config) {
  for (const auto& stage : config.stages) {
    if (stage.name != "prefill") continue;
    const auto it = stage.options.values().find("chunk_tokens");
    if (it == stage.options.values().end()) return 0;
    int64_t v = 0;
    auto [ptr, ec] = std::from_chars(it->second.data(), it->second.data() + it->second.size(), v);
    return ec == std::errc() && v > 0 ? v : 0;
  }
  return 0;
}

// Runs the session's uncached tokens through the model, `chunk` at a time.
void forward_all(Session& session, int64_t chunk) {
  const int64_t total = static_cast<int64_t>(session.tokens().size());
  for (int64_t done = session.cached(); done < total;) {
    const auto n = static_cast<int32_t>(chunk > 0 ? std::min(chunk, total - done) : total - done);
    session.forward(n, false);
    done += n;
  }
}

// One pp run: tokens/s of the prompt's forward passes and the time to the
// first token.
void run_pp(Pipeline& p, const std::vector<int32_t>& ids, int64_t n, int64_t chunk, double& tps,
            double& ttft) {
  NullSink sink;
  auto session = p.new_session(std::span<const int32_t>(ids.data(), static_cast<size_t>(n)), sink);
  const auto start = Clock::now();
  forward_all(*session, chunk);
  const double prefill = seconds_since(start);
  (void)session->sample();
  ttft = seconds_since(start);
  tps = prefill > 0 ? static_cast<double>(n) / prefill : 0.0;
}

// One tg run: 1 + depth tokens prefilled untimed on the first stage's
// backend, then N timed decode steps on the last stage's (after handing the
// cache over, untimed, where that is another backend).
double run_tg(Pipeline& p, const std::vector<int32_t>& ids, int64_t n, int64_t depth,
              int64_t chunk) {
  NullSink sink;
  auto session =
      p.new_session(std::span<const int32_t>(ids.data(), static_cast<size_t>(1 + depth)), sink);
  forward_all(*session, chunk > 0 ? chunk : kDepthChunk);
  p.move_to_stage(*session, p.check().stages.size() - 1);
  const auto start = Clock::now();
  for (int64_t i = 0; i < n; ++i) {
    session->append(session->sample());
    session->forward(1, false);
  }
  const double elapsed = seconds_since(start);
  return elapsed > 0 ? static_cast<double>(n) / elapsed : 0.0;
}

std::string print_table(const BenchContext& c, const std::vector<TestResult>& results) {
  const std::vector<std::string> header = {"test",         "backend",    "version", "threads",
                                           "cpu features", "t/s median", "stddev",  "min",
                                           "max",          "reps",       "ttft ms"};
  const std::vector<bool> right = {false, false, false, true, false, true,
                                   true,  true,  true,  true, true};
  std::vector<std::vector<std::string>> rows;
  for (const auto& r : results) {
    rows.push_back({r.spec.name, c.backend, c.plugin_version, c.threads, features_text(c),
                    fixed(r.tps.median, 2), fixed(r.tps.stddev, 2), fixed(r.tps.min, 2),
                    fixed(r.tps.max, 2), std::to_string(r.tokens_per_second.size()),
                    r.spec.kind == "pp" ? fixed(r.ttft.median * 1000, 1) : "-"});
  }
  std::vector<size_t> width(header.size());
  for (size_t i = 0; i < header.size(); ++i) {
    width[i] = header[i].size();
    for (const auto& row : rows) width[i] = std::max(width[i], row[i].size());
  }
  std::ostringstream s;
  auto line = [&](const std::vector<std::string>& cells) {
    s << "|";
    for (size_t i = 0; i < cells.size(); ++i) {
      s << " " << (right[i] ? std::right : std::left) << std::setw(static_cast<int>(width[i]))
        << cells[i] << " |";
    }
    s << "\n";
  };
  line(header);
  s << "|";
  for (size_t i = 0; i < header.size(); ++i) {
    s << " " << (right[i] ? std::string(width[i] - 1, '-') + ":" : std::string(width[i], '-'))
      << " |";
  }
  s << "\n";
  for (const auto& row : rows) line(row);
  s << "\nmodel " << c.model << " (" << mib(c.model_bytes) << "), cpu " << c.cpu_model << "\n"
    << "load " << fixed(c.load_seconds * 1000, 1) << " ms, KV cache " << mib(c.kv_cache_bytes)
    << " (" << c.kv_cache_tokens << " tokens of " << c.kv_cache_dtype << "), peak RSS "
    << mib(c.peak_rss_bytes) << ", " << c.repetitions << " repetitions after " << c.warmup
    << " warm-up run" << (c.warmup == 1 ? "" : "s") << (c.interleave ? ", interleaved" : "")
    << "\n";
  if (c.device_memory_bytes) s << "device memory in use " << mib(*c.device_memory_bytes) << "\n";
  return s.str();
}

std::string print_json(const BenchContext& c, const std::vector<TestResult>& results) {
  JsonWriter j;
  j.begin_object();
  j.field("duet_version", DUET_VERSION);
  j.field("pipeline", c.pipeline);
  j.field("model", c.model);
  j.field("model_bytes", c.model_bytes);
  j.field("backend", c.backend);
  j.field("plugin_version", c.plugin_version);
  j.field("threads", c.threads);
  j.field("cpu_model", c.cpu_model);
  j.key("cpu_features").begin_array();
  for (const auto& f : c.cpu_features) j.value(f);
  j.end_array();
  j.field("sampler_order", c.sampler_order);
  j.field("repetitions", c.repetitions);
  j.field("warmup", c.warmup);
  j.field("interleave", c.interleave);
  j.field("load_seconds", c.load_seconds);
  j.field("kv_cache_bytes", c.kv_cache_bytes);
  j.field("kv_cache_capacity_tokens", c.kv_cache_tokens);
  j.field("kv_cache_dtype", c.kv_cache_dtype);
  j.field("peak_rss_bytes", c.peak_rss_bytes);
  j.key("device_memory_bytes");
  c.device_memory_bytes ? j.value(*c.device_memory_bytes) : j.null();
  j.key("results").begin_array();
  for (const auto& r : results) {
    j.begin_object();
    j.field("test", r.spec.name);
    j.field("kind", r.spec.kind);
    j.field("n_prompt", r.spec.kind == "pp" ? r.spec.tokens : int64_t{0});
    j.field("n_gen", r.spec.kind == "tg" ? r.spec.tokens : int64_t{0});
    j.field("depth", r.spec.depth);
    j.field("backend", c.backend);
    j.field("plugin_version", c.plugin_version);
    j.field("threads", c.threads);
    j.key("cpu_features").begin_array();
    for (const auto& f : c.cpu_features) j.value(f);
    j.end_array();
    j.field("tokens_per_second_median", r.tps.median);
    j.field("tokens_per_second_stddev", r.tps.stddev);
    j.field("tokens_per_second_min", r.tps.min);
    j.field("tokens_per_second_max", r.tps.max);
    j.field("tokens_per_second_mean", r.tps.mean);
    j.key("samples_tokens_per_second").begin_array();
    for (double v : r.tokens_per_second) j.value(v);
    j.end_array();
    j.field("repetitions", static_cast<int64_t>(r.tokens_per_second.size()));
    if (r.spec.kind == "pp") j.field("time_to_first_token_seconds", r.ttft.median);
    j.field("load_seconds", c.load_seconds);
    j.field("kv_cache_bytes", c.kv_cache_bytes);
    j.field("kv_cache_dtype", c.kv_cache_dtype);
    j.field("peak_rss_bytes", r.peak_rss_bytes);
    j.end_object();
  }
  j.end_array();
  j.end_object();
  return j.str() + "\n";
}

std::string print_csv(const BenchContext& c, const std::vector<TestResult>& results) {
  std::ostringstream s;
  s << "test,backend,plugin_version,threads,cpu_features,"
       "tokens_per_second_median,tokens_per_second_stddev,tokens_per_second_min,"
       "tokens_per_second_max,repetitions,time_to_first_token_ms,load_ms,"
       "kv_cache_bytes,peak_rss_bytes,kv_cache_dtype\n";
  for (const auto& r : results) {
    s << csv_field(r.spec.name) << "," << csv_field(c.backend) << "," << csv_field(c.plugin_version)
      << "," << csv_field(c.threads) << "," << csv_field(features_text(c)) << ","
      << fixed(r.tps.median, 3) << "," << fixed(r.tps.stddev, 3) << "," << fixed(r.tps.min, 3)
      << "," << fixed(r.tps.max, 3) << "," << r.tokens_per_second.size() << ","
      << (r.spec.kind == "pp" ? fixed(r.ttft.median * 1000, 3) : "") << ","
      << fixed(c.load_seconds * 1000, 3) << "," << c.kv_cache_bytes << "," << r.peak_rss_bytes
      << "," << csv_field(c.kv_cache_dtype) << "\n";
  }
  return s.str();
}

// Calls run(t, i) for run i (warm-ups first) of every test t, one test's
// runs after another's or in rounds (`interleave`), with progress on stderr
// when it is a terminal.
void run_all(const std::vector<std::string>& names, int64_t warmup, int64_t repetitions,
             bool interleave, const std::function<void(size_t, int64_t)>& run) {
  const bool progress = isatty(STDERR_FILENO) != 0;
  const auto one = [&](size_t t, int64_t i) {
    if (progress) {
      std::cerr << "\rduet bench: " << names[t] << (i < warmup ? " warm-up " : " run ")
                << (i < warmup ? i + 1 : i - warmup + 1) << "/"
                << (i < warmup ? warmup : repetitions) << "    " << std::flush;
    }
    run(t, i);
  };
  if (interleave) {
    for (int64_t i = 0; i < warmup + repetitions; ++i) {
      for (size_t t = 0; t < names.size(); ++t) one(t, i);
    }
  } else {
    for (size_t t = 0; t < names.size(); ++t) {
      for (int64_t i = 0; i < warmup + repetitions; ++i) one(t, i);
    }
  }
  if (progress) std::cerr << "\r" << std::string(60, ' ') << "\r" << std::flush;
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

  std::vector<TestSpec> specs;
  std::vector<BatchTest> batch_tests;
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

  if (batch) check_batch_tests(batch_tests, config);
  // The cache must hold the largest test; say which and how to make room.
  const TestSpec* largest = specs.empty() ? nullptr : &specs.front();
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
  BenchContext c;
  c.load_seconds = seconds_since(load_start);
  c.pipeline = config.source.string();
  c.model = config.model.path.string();
  std::error_code ec;
  c.model_bytes = std::filesystem::file_size(config.model.path, ec);
  if (ec) c.model_bytes = 0;
  c.backend = pipeline->check().backend;
  c.plugin_version = backend_plugin_version(host, c.backend);
  const auto& backend_options = pipeline->check().backend_options.values();
  const auto threads = backend_options.find("threads");
  c.threads = threads == backend_options.end() ? "-" : threads->second;
  c.cpu_model = cpu_model_name();
  c.cpu_features = cpu_features();
  c.sampler_order = pipeline->sampler_order();
  c.repetitions = repetitions;
  c.warmup = warmup;
  c.interleave = vm.count("interleave") != 0;
  c.kv_cache_bytes = pipeline->kv_cache_bytes();
  c.kv_cache_tokens = config.kv_cache.capacity_tokens;
  c.kv_cache_dtype = std::string(dtype_name(config.kv_cache.dtype));

  if (batch) {
    std::vector<BatchResult> results(batch_tests.size());
    std::vector<std::string> names;
    for (size_t t = 0; t < batch_tests.size(); ++t) {
      results[t].test = batch_tests[t];
      names.push_back(batch_tests[t].name());
    }
    run_all(names, warmup, repetitions, c.interleave, [&](size_t t, int64_t i) {
      // Every run's prompts are its own, so no run finds another's in the prefix cache.
      const auto stream = static_cast<uint64_t>(t) * static_cast<uint64_t>(warmup + repetitions) +
                          static_cast<uint64_t>(i);
      run_batch_test(*pipeline, batch_tests[t], stream, i >= warmup, results[t]);
      if (i + 1 == warmup + repetitions) results[t].peak_rss_bytes = peak_rss_bytes();
    });
    c.peak_rss_bytes = peak_rss_bytes();
    std::cout << (output == "json"  ? batch_json(c, results)
                  : output == "csv" ? batch_csv(c, results)
                                    : batch_table(c, results));
    return 0;
  }

  int64_t max_ids = 1;
  for (const auto& s : specs) max_ids = std::max(max_ids, s.kind == "pp" ? s.tokens : 1 + s.depth);
  const std::vector<int32_t> ids =
      bench_tokens(static_cast<size_t>(max_ids), pipeline->check().hparams.n_vocab);

  const int64_t chunk = prefill_chunk(config);
  std::vector<TestResult> results(specs.size());
  std::vector<std::string> names;
  for (size_t t = 0; t < specs.size(); ++t) {
    results[t].spec = specs[t];
    names.push_back(specs[t].name);
  }
  run_all(names, warmup, repetitions, c.interleave, [&](size_t t, int64_t i) {
    const TestSpec& spec = specs[t];
    TestResult& r = results[t];
    double tps = 0.0, ttft = 0.0;
    if (spec.kind == "pp") {
      run_pp(*pipeline, ids, spec.tokens, chunk, tps, ttft);
    } else {
      tps = run_tg(*pipeline, ids, spec.tokens, spec.depth, chunk);
    }
    if (i >= warmup) {
      r.tokens_per_second.push_back(tps);
      if (spec.kind == "pp") r.first_token_seconds.push_back(ttft);
    }
    if (i + 1 == warmup + repetitions) {
      r.tps = summarize_values(r.tokens_per_second);
      r.ttft = summarize_values(r.first_token_seconds);
      r.peak_rss_bytes = peak_rss_bytes();
    }
  });
  c.peak_rss_bytes = peak_rss_bytes();
  c.device_memory_bytes = pipeline->device_memory_in_use();

  if (output == "json") {
    std::cout << print_json(c, results);
  } else if (output == "csv") {
    std::cout << print_csv(c, results);
  } else {
    std::cout << print_table(c, results);
  }
  return 0;
}

}  // namespace duet::cli
