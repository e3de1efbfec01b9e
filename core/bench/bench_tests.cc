// bench_tests.cc — running and reporting `duet bench`'s pp and tg tests
// (bench_tests.h).
#include "bench_tests.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "bench_system.h"
#include "json_writer.h"

namespace duet::bench {
namespace {

// Untimed prefill of a tg test's depth runs in passes of this many tokens
// when the pipeline's prefill stage sets no chunk_tokens.
constexpr int32_t kDepthChunk = 512;

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
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
  auto session = p.new_session(std::span<const int32_t>(ids.data(), static_cast<size_t>(n)));
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
  auto session =
      p.new_session(std::span<const int32_t>(ids.data(), static_cast<size_t>(1 + depth)));
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

}  // namespace

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

std::string tests_table(const BenchContext& c, const std::vector<TestResult>& results) {
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
  s << "\n" << context_lines(c);
  return s.str();
}

std::string backend_summary(const PluginHost& host, const std::string& name) {
  for (const auto& info : host.components(ComponentKind::kBackend)) {
    if (info.name == name) return info.summary;
  }
  return "";
}

std::string tests_json(const BenchContext& c, const std::vector<TestResult>& results) {
  JsonWriter j;
  j.begin_object();
  j.field("duet_version", DUET_VERSION);
  j.field("pipeline", c.pipeline);
  j.field("model", c.model);
  j.field("model_bytes", c.model_bytes);
  j.field("backend", c.backend);
  j.field("plugin_version", c.plugin_version);
  j.field("backend_summary", c.backend_summary);
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

std::string tests_csv(const BenchContext& c, const std::vector<TestResult>& results) {
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

std::vector<TestResult> run_tests(Pipeline& pipeline, const PipelineConfig& config,
                                  const std::vector<TestSpec>& specs, int64_t warmup,
                                  int64_t repetitions, bool interleave) {
  int64_t max_ids = 1;
  for (const auto& s : specs) max_ids = std::max(max_ids, s.kind == "pp" ? s.tokens : 1 + s.depth);
  const std::vector<int32_t> ids =
      bench_tokens(static_cast<size_t>(max_ids), pipeline.check().hparams.n_vocab);

  const int64_t chunk = prefill_chunk(config);
  std::vector<TestResult> results(specs.size());
  std::vector<std::string> names;
  for (size_t t = 0; t < specs.size(); ++t) {
    results[t].spec = specs[t];
    names.push_back(specs[t].name);
  }
  run_all(names, warmup, repetitions, interleave, [&](size_t t, int64_t i) {
    const TestSpec& spec = specs[t];
    TestResult& r = results[t];
    double tps = 0.0, ttft = 0.0;
    if (spec.kind == "pp") {
      run_pp(pipeline, ids, spec.tokens, chunk, tps, ttft);
    } else {
      tps = run_tg(pipeline, ids, spec.tokens, spec.depth, chunk);
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
  return results;
}

}  // namespace duet::bench
