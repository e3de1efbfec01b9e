// serve_metrics.h — what `duet serve` counts, and its text in the Prometheus
// exposition format (GET /metrics). Thread-safe: the scheduler thread and the
// connection thread update it, any thread renders it.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace duet::serve {

// A cumulative histogram with fixed upper bounds (seconds).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double value);
  // `name`'s _bucket, _sum and _count lines.
  std::string render(const std::string& name) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // one per bound, then +Inf
  double sum_ = 0.0;
  uint64_t count_ = 0;
};

// The scheduler's state after its latest step.
struct EngineGauges {
  int64_t waiting = 0;  // accepted, not yet running (queued or tokenizing)
  int64_t running = 0;
  int64_t kv_blocks_total = 0;
  int64_t kv_blocks_used = 0;    // held by running sequences
  int64_t kv_blocks_cached = 0;  // prompt prefixes kept for reuse, free to take back
};

class ServeMetrics {
 public:
  ServeMetrics();

  void count_response(int status);  // every HTTP response, by status code
  // A request that ran: its finish reason ("stop", "length", "cancelled")
  // and token counts.
  void count_finished(const std::string& finish, int64_t prompt_tokens, int64_t generated_tokens);
  void observe_first_token(double seconds);  // from arrival to the first token
  void observe_inter_token(double seconds);  // between two tokens of a request
  // A finished request's KV blocks moved between the caches of a pipeline's
  // backends (`backends:`): bytes and seconds.
  void observe_kv_move(uint64_t bytes, double seconds);
  void set_gauges(const EngineGauges& gauges);

  // Every metric, each with its # HELP and # TYPE lines.
  std::string render() const;

 private:
  mutable std::mutex mutex_;
  std::map<int, uint64_t> responses_;
  std::map<std::string, uint64_t> finished_;
  int64_t prompt_tokens_ = 0;
  int64_t generated_tokens_ = 0;
  Histogram first_token_;
  Histogram inter_token_;
  Histogram kv_moved_bytes_;
  Histogram kv_move_seconds_;
  EngineGauges gauges_;
};

}  // namespace duet::serve
