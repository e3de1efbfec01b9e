// compare_run.h — running an experiment's variants, each in a process of its
// own (`duet bench`, `duet perplexity`, `duet run` as children), and what
// they measured.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "duet/app/experiment.h"

namespace duet::compare {

struct SpeedResult {
  std::string test;                       // "pp128", "tg32", "tg32@d512", as duet bench names them
  std::vector<double> tokens_per_second;  // one sample per round
  std::vector<double> ttft_seconds;       // pp tests: time to first token per round
};

struct GreedyResult {
  std::string prompt;
  std::vector<int32_t> tokens;              // generated, end-of-generation included
  int32_t matching_tokens = 0;              // leading tokens equal to the baseline's
  std::optional<int32_t> first_divergence;  // index of the first differing token
  std::string baseline_continuation;        // the baseline's text from there on
  std::string continuation;                 // this variant's
};

struct Failure {
  std::string step;   // "speed", "fidelity", "greedy"
  int exit_code = 0;  // the child's exit code, or 128 + signal
  std::string reason;
};

struct VariantResult {
  const Variant* variant = nullptr;
  std::string backend;        // as the child reported it
  std::string status = "ok";  // "ok", "failed", "interrupted"
  std::optional<Failure> failure;
  std::vector<double> load_seconds;      // one per speed run
  uint64_t peak_rss_bytes = 0;           // the largest over its speed runs
  std::optional<uint64_t> device_bytes;  // device memory in use, the largest; none on the host
  std::vector<SpeedResult> speed;        // in the order duet bench ran them
  std::optional<std::map<std::string, double>> fidelity;  // duet perplexity --json's figures
  std::vector<GreedyResult> greedy;
};

struct CompareResult {
  std::vector<VariantResult> variants;  // the baseline first, then the file's order
  bool interrupted = false;
  std::string cpu_model;
  std::vector<std::string> cpu_features;
};

// Runs `e`: speed in rounds (each round runs every variant once, in turn),
// then fidelity (the baseline first, saving its logits in `work_dir`), then
// the greedy prompts. A variant whose child fails is marked failed with its
// reason and skipped from then on; the others go on. When `stop` becomes
// true (Ctrl-C), what has been measured is kept and the rest is marked
// interrupted. Progress goes to stderr.
CompareResult run_experiment(const Experiment& e, const std::string& work_dir,
                             const std::atomic<bool>& stop);

}  // namespace duet::compare
