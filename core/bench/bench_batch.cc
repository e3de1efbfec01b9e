#include "bench_batch.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>

#include "bench_stats.h"
#include "duet/app/scheduler.h"
#include "duet/error.h"

namespace duet::bench {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

// Nearest-rank percentile `q` in (0, 1] of sorted `v`; 0 when empty.
double percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0.0;
  const auto rank = static_cast<size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  return sorted[std::max<size_t>(rank, 1) - 1];
}

struct Figures {
  BenchSummary tps;
  double step_ms = 0.0;
  double step_wall_ms = 0.0;
  double itl_mean = 0.0;
  double itl_p50 = 0.0;
  double itl_p99 = 0.0;
  std::optional<double> tps_vs_1;  // against the one-sequence test of the same sizes
  std::optional<double> step_vs_1;
};

Figures figures(const BatchResult& r, const std::vector<BatchResult>& all) {
  Figures f;
  f.tps = summarize_values(r.tokens_per_second);
  f.step_ms = summarize_values(r.step_ms).median;
  f.step_wall_ms = summarize_values(r.step_wall_ms).median;
  std::vector<double> itl = r.itl_ms;
  std::sort(itl.begin(), itl.end());
  f.itl_mean = summarize_values(itl).mean;
  f.itl_p50 = percentile(itl, 0.50);
  f.itl_p99 = percentile(itl, 0.99);
  for (const BatchResult& base : all) {
    if (base.test.sequences != 1 || base.test.prompt_tokens != r.test.prompt_tokens ||
        base.test.gen_tokens != r.test.gen_tokens)
      continue;
    const double base_tps = summarize_values(base.tokens_per_second).median;
    const double base_step = summarize_values(base.step_ms).median;
    if (base_tps > 0) f.tps_vs_1 = f.tps.median / base_tps;
    if (base_step > 0) f.step_vs_1 = f.step_ms / base_step;
  }
  return f;
}

std::string ratio_text(const std::optional<double>& v) { return v ? fixed(*v, 2) + "x" : "-"; }

}  // namespace

std::string BatchTest::name() const {
  return "pp" + std::to_string(prompt_tokens) + "+tg" + std::to_string(gen_tokens) + "@b" +
         std::to_string(sequences);
}

void check_batch_tests(const std::vector<BatchTest>& tests, const PipelineConfig& config) {
  const int64_t block = config.kv_cache.block_tokens > 0 ? config.kv_cache.block_tokens
                                                         : config.kv_cache.capacity_tokens;
  const int64_t total_blocks = config.kv_cache.capacity_tokens / block;
  for (const BatchTest& t : tests) {
    if (t.sequences > config.batching.max_sequences) {
      throw Error(ErrorKind::kConfig,
                  "duet bench: " + t.name() + " runs " + std::to_string(t.sequences) +
                      " sequences at once but batching.max_sequences is " +
                      std::to_string(config.batching.max_sequences) +
                      "; add --set batching.max_sequences=" + std::to_string(t.sequences));
    }
    // Every position but the last generated token's goes through the cache.
    const int64_t per_sequence = (t.prompt_tokens + t.gen_tokens - 1 + block - 1) / block;
    if (t.sequences * per_sequence > total_blocks) {
      // A cache of one block (no block_tokens) gives each sequence all of it:
      // blocks of 16 are the fix there, not a larger cache.
      constexpr int64_t kSuggestedBlock = 16;
      const bool one_block = total_blocks == 1;
      const int64_t fit_block = one_block ? kSuggestedBlock : block;
      const int64_t fit = (t.prompt_tokens + t.gen_tokens - 1 + fit_block - 1) / fit_block;
      // The scheduler also wants a block for each of batching.max_sequences,
      // and the blocks must divide the cache.
      int64_t capacity = std::max({config.kv_cache.capacity_tokens, t.sequences * fit * fit_block,
                                   int64_t{config.batching.max_sequences} * fit_block});
      capacity = (capacity + fit_block - 1) / fit_block * fit_block;
      std::string fix = "components.kv_cache.capacity_tokens=" + std::to_string(capacity) +
                        " (at most the model's context length)";
      if (one_block) {
        fix = "components.kv_cache.block_tokens=" + std::to_string(kSuggestedBlock) +
              (capacity != config.kv_cache.capacity_tokens ? " --set " + fix : "");
      }
      throw Error(ErrorKind::kConfig,
                  "duet bench: " + t.name() + " needs " + std::to_string(t.sequences) + " x " +
                      std::to_string(per_sequence * block) +
                      " KV-cache tokens at once but components.kv_cache.capacity_tokens is " +
                      std::to_string(config.kv_cache.capacity_tokens) +
                      (one_block ? ", one block that a sequence takes whole" : "") +
                      "; add --set " + fix + (one_block ? "" : " or lower -p/-n"));
    }
  }
}

void run_batch_test(Pipeline& pipeline, const BatchTest& test, uint64_t stream, bool timed,
                    BatchResult& result) {
  const int32_t vocab = pipeline.check().hparams.n_vocab;
  const auto n = static_cast<size_t>(test.sequences);
  const auto p = static_cast<size_t>(test.prompt_tokens);
  const std::vector<int32_t> ids = bench_tokens(n * p, vocab, 1 + stream);
  Scheduler scheduler(pipeline);
  for (size_t i = 0; i < n; ++i) {
    Request r;
    r.id = std::to_string(i);
    r.prompt.assign(ids.begin() + static_cast<ptrdiff_t>(i * p),
                    ids.begin() + static_cast<ptrdiff_t>((i + 1) * p));
    // Distinct first tokens: no two prompts share a cached prefix.
    r.prompt[0] = static_cast<int32_t>((stream * n + i) % static_cast<uint64_t>(vocab));
    r.settings.max_new_tokens = static_cast<int32_t>(test.gen_tokens);
    r.settings.stop = std::vector<std::string>{};
    r.settings.ignore_end_of_generation = true;
    scheduler.submit(std::move(r));
  }
  const SchedulerStats& stats = scheduler.stats();
  int64_t full_steps = 0;
  double full_wall = 0.0, full_forward = 0.0;
  std::vector<double> itl;
  auto previous = Clock::now();
  while (true) {
    const int64_t prefill_rows = stats.prefill_rows, decode_rows = stats.decode_rows;
    const double forward = stats.forward_seconds;
    if (!scheduler.step()) break;
    const auto now = Clock::now();
    const double wall = std::chrono::duration<double>(now - previous).count();
    previous = now;
    // Each decode row is a sequence whose previous token came from the step
    // before: its wait for this token is this step's time.
    const int64_t decoded = stats.decode_rows - decode_rows;
    itl.insert(itl.end(), static_cast<size_t>(decoded), wall * 1000);
    if (stats.prefill_rows == prefill_rows && decoded == test.sequences) {
      ++full_steps;
      full_wall += wall;
      full_forward += stats.forward_seconds - forward;
    }
  }
  (void)scheduler.take_finished();
  if (full_steps == 0) {
    throw Error(ErrorKind::kUsage,
                "duet bench: " + test.name() + " had no step with all " +
                    std::to_string(test.sequences) +
                    " sequences decoding (prompts were still being prefilled); raise -n "
                    "(e.g. -n 64) or batching.max_step_tokens");
  }
  if (!timed) return;
  result.tokens_per_second.push_back(static_cast<double>(test.sequences * full_steps) / full_wall);
  result.step_ms.push_back(full_forward / static_cast<double>(full_steps) * 1000);
  result.step_wall_ms.push_back(full_wall / static_cast<double>(full_steps) * 1000);
  result.itl_ms.insert(result.itl_ms.end(), itl.begin(), itl.end());
  result.full_decode_steps = full_steps;
  result.preemptions += stats.preemptions;
  result.prefix_hit_tokens += stats.prefix_hit_tokens;
}

std::string batch_table(const BenchContext& c, const std::vector<BatchResult>& results) {
  const std::vector<std::string> header = {"test",    "backend", "threads", "seqs", "agg t/s",
                                           "stddev",  "vs 1",    "itl ms",  "p50",  "p99",
                                           "step ms", "vs 1",    "reps"};
  std::vector<std::vector<std::string>> rows;
  for (const BatchResult& r : results) {
    const Figures f = figures(r, results);
    rows.push_back({r.test.name(), c.backend, c.threads, std::to_string(r.test.sequences),
                    fixed(f.tps.median, 2), fixed(f.tps.stddev, 2), ratio_text(f.tps_vs_1),
                    fixed(f.itl_mean, 2), fixed(f.itl_p50, 2), fixed(f.itl_p99, 2),
                    fixed(f.step_ms, 2), ratio_text(f.step_vs_1),
                    std::to_string(r.tokens_per_second.size())});
  }
  std::vector<size_t> width(header.size());
  for (size_t i = 0; i < header.size(); ++i) {
    width[i] = header[i].size();
    for (const auto& row : rows) width[i] = std::max(width[i], row[i].size());
  }
  std::ostringstream s;
  const auto line = [&](const std::vector<std::string>& cells) {
    s << "|";
    for (size_t i = 0; i < cells.size(); ++i) {
      s << " " << (i < 2 ? std::left : std::right) << std::setw(static_cast<int>(width[i]))
        << cells[i] << " |";
    }
    s << "\n";
  };
  line(header);
  s << "|";
  for (size_t i = 0; i < header.size(); ++i) {
    s << " " << (i < 2 ? std::string(width[i], '-') : std::string(width[i] - 1, '-') + ":") << " |";
  }
  s << "\n";
  for (const auto& row : rows) line(row);
  s << "\nagg t/s: tokens after each sequence's first over the steps in which all decoded; "
       "step ms: the forward pass of such a step; itl: every gap between two tokens of a "
       "sequence (docs/batching.md)\n"
    << context_lines(c);
  return s.str();
}

std::string batch_json(const BenchContext& c, const std::vector<BatchResult>& results) {
  json rows = json::array();
  for (const BatchResult& r : results) {
    const Figures f = figures(r, results);
    rows.push_back({{"test", r.test.name()},
                    {"kind", "batch"},
                    {"sequences", r.test.sequences},
                    {"n_prompt", r.test.prompt_tokens},
                    {"n_gen", r.test.gen_tokens},
                    {"aggregate_tokens_per_second_median", f.tps.median},
                    {"aggregate_tokens_per_second_stddev", f.tps.stddev},
                    {"aggregate_tokens_per_second_min", f.tps.min},
                    {"aggregate_tokens_per_second_max", f.tps.max},
                    {"samples_tokens_per_second", r.tokens_per_second},
                    {"aggregate_vs_1", f.tps_vs_1 ? json(*f.tps_vs_1) : json(nullptr)},
                    {"inter_token_ms_mean", f.itl_mean},
                    {"inter_token_ms_p50", f.itl_p50},
                    {"inter_token_ms_p99", f.itl_p99},
                    {"decode_step_ms", f.step_ms},
                    {"decode_step_wall_ms", f.step_wall_ms},
                    {"decode_step_vs_1", f.step_vs_1 ? json(*f.step_vs_1) : json(nullptr)},
                    {"full_decode_steps", r.full_decode_steps},
                    {"preemptions", r.preemptions},
                    {"prefix_hit_tokens", r.prefix_hit_tokens},
                    {"repetitions", r.tokens_per_second.size()},
                    {"peak_rss_bytes", r.peak_rss_bytes}});
  }
  const json out = {{"duet_version", DUET_VERSION},
                    {"pipeline", c.pipeline},
                    {"model", c.model},
                    {"model_bytes", c.model_bytes},
                    {"backend", c.backend},
                    {"plugin_version", c.plugin_version},
                    {"backend_summary", c.backend_summary},
                    {"threads", c.threads},
                    {"cpu_model", c.cpu_model},
                    {"cpu_features", c.cpu_features},
                    {"sampler_order", c.sampler_order},
                    {"repetitions", c.repetitions},
                    {"warmup", c.warmup},
                    {"interleave", c.interleave},
                    {"load_seconds", c.load_seconds},
                    {"kv_cache_bytes", c.kv_cache_bytes},
                    {"kv_cache_capacity_tokens", c.kv_cache_tokens},
                    {"kv_cache_dtype", c.kv_cache_dtype},
                    {"peak_rss_bytes", c.peak_rss_bytes},
                    {"results", rows}};
  return out.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

std::string batch_csv(const BenchContext& c, const std::vector<BatchResult>& results) {
  std::ostringstream s;
  s << "test,backend,plugin_version,threads,cpu_features,sequences,n_prompt,n_gen,"
       "aggregate_tokens_per_second_median,aggregate_tokens_per_second_stddev,aggregate_vs_1,"
       "inter_token_ms_mean,inter_token_ms_p50,inter_token_ms_p99,decode_step_ms,"
       "decode_step_vs_1,repetitions,preemptions,peak_rss_bytes\n";
  for (const BatchResult& r : results) {
    const Figures f = figures(r, results);
    s << csv_field(r.test.name()) << "," << csv_field(c.backend) << ","
      << csv_field(c.plugin_version) << "," << csv_field(c.threads) << ","
      << csv_field(features_text(c)) << "," << r.test.sequences << "," << r.test.prompt_tokens
      << "," << r.test.gen_tokens << "," << fixed(f.tps.median, 3) << "," << fixed(f.tps.stddev, 3)
      << "," << (f.tps_vs_1 ? fixed(*f.tps_vs_1, 3) : "") << "," << fixed(f.itl_mean, 3) << ","
      << fixed(f.itl_p50, 3) << "," << fixed(f.itl_p99, 3) << "," << fixed(f.step_ms, 3) << ","
      << (f.step_vs_1 ? fixed(*f.step_vs_1, 3) : "") << "," << r.tokens_per_second.size() << ","
      << r.preemptions << "," << r.peak_rss_bytes << "\n";
  }
  return s.str();
}

}  // namespace duet::bench
