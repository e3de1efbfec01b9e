// bench_tests.h — `duet bench`'s pp and tg tests, in the spirit of
// llama-bench: a pp test times one prompt's forward passes over N tokens, a
// tg test times N decode steps (sample, append, forward one token) after D
// tokens already cached. Each is repeated after warm-up runs and reported as
// a table, JSON or CSV.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bench_context.h"
#include "bench_stats.h"
#include "duet/app/pipeline.h"
#include "duet/app/plugin_host.h"

namespace duet::bench {

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
// version for a built-in, "-" when none did.
std::string backend_plugin_version(const PluginHost& host, const std::string& name);
// The summary backend `name` registered with (`duet plugins`), "" if none.
std::string backend_summary(const PluginHost& host, const std::string& name);

// Calls run(t, i) for run i (warm-ups first) of every test t, one test's
// runs after another's or in rounds (`interleave`), with progress on stderr
// when it is a terminal.
void run_all(const std::vector<std::string>& names, int64_t warmup, int64_t repetitions,
             bool interleave, const std::function<void(size_t, int64_t)>& run);

// Runs every test of `specs` on `pipeline` (warm-ups untimed) and returns
// their figures in the same order. REQUIRES: the KV cache holds the largest
// test's cache_tokens(); prompts are made of bench_tokens().
std::vector<TestResult> run_tests(Pipeline& pipeline, const PipelineConfig& config,
                                  const std::vector<TestSpec>& specs, int64_t warmup,
                                  int64_t repetitions, bool interleave);

// The report in bench's three formats.
std::string tests_table(const BenchContext& c, const std::vector<TestResult>& results);
std::string tests_json(const BenchContext& c, const std::vector<TestResult>& results);
std::string tests_csv(const BenchContext& c, const std::vector<TestResult>& results);

}  // namespace duet::bench
