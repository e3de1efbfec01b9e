// bench_batch.h — `duet bench --batch N,...`: throughput and latency of N
// sequences decoding at once through the batching scheduler
// (duet/app/scheduler.h). What each figure measures is defined in
// docs/batching.md ("duet bench --batch").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench_context.h"
#include "duet/app/pipeline.h"

namespace duet::bench {

struct BatchTest {
  int64_t sequences = 0;      // N requests, all submitted at once
  int64_t prompt_tokens = 0;  // each a distinct prompt of this many tokens
  int64_t gen_tokens = 0;     // each generating exactly this many
  std::string name() const;   // "pp32+tg64@b16"
};

struct BatchResult {
  BatchTest test;
  // One per timed repetition.
  std::vector<double> tokens_per_second;  // aggregate over the full-decode steps
  std::vector<double> step_ms;            // mean forward pass of a full-decode step
  std::vector<double> step_wall_ms;       // mean wall time of a full-decode step
  std::vector<double> itl_ms;             // every inter-token gap of every timed repetition
  int64_t full_decode_steps = 0;          // per repetition (the last)
  int64_t preemptions = 0;                // over the timed repetitions
  int64_t prefix_hit_tokens = 0;          // over the timed repetitions
  uint64_t peak_rss_bytes = 0;
};

// Throws duet::Error(kConfig) naming the --set to add when a test cannot
// keep all its sequences running at once: more than batching.max_sequences,
// or more KV-cache blocks than the cache has.
void check_batch_tests(const std::vector<BatchTest>& tests, const PipelineConfig& config);

// One run of `test` on prompts from token stream `stream` (distinct for
// every run, so the prefix cache of one run never serves another); adds its
// figures to `result` when `timed`. Throws duet::Error(kUsage) when no step
// had all the sequences decoding (too few generated tokens to measure).
void run_batch_test(Pipeline& pipeline, const BatchTest& test, uint64_t stream, bool timed,
                    BatchResult& result);

// The report in bench's three formats.
std::string batch_table(const BenchContext& c, const std::vector<BatchResult>& results);
std::string batch_json(const BenchContext& c, const std::vector<BatchResult>& results);
std::string batch_csv(const BenchContext& c, const std::vector<BatchResult>& results);

}  // namespace duet::bench
