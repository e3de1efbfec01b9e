// bench_context.h — what every `duet bench` report says around its rows
// (the pipeline, backend, machine and run settings), the token ids its
// tests feed, and the number formatting its tables share.
#pragma once

#include <cstdint>
#include <iomanip>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "duet/byte_size.h"
#include "duet/rng.h"

namespace duet::bench {

struct BenchContext {
  std::string pipeline;
  std::string model;
  uint64_t model_bytes = 0;
  std::string backend;
  std::string plugin_version;
  std::string backend_summary;  // the backend's registered one-liner: its kernels and CPU path
  std::string threads;          // backend.options.threads, or "-"
  std::string cpu_model;
  std::vector<std::string> cpu_features;
  std::string sampler_order;
  int64_t repetitions = 0;
  int64_t warmup = 0;
  bool interleave = false;  // repetitions in rounds across the tests
  double load_seconds = 0.0;
  uint64_t kv_cache_bytes = 0;
  int64_t kv_cache_tokens = 0;
  std::string kv_cache_dtype;
  uint64_t peak_rss_bytes = 0;
  std::optional<uint64_t> device_memory_bytes;  // in use on a non-host device, after the runs
};

inline std::string join(const std::vector<std::string>& items, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? sep : "") + items[i];
  return out;
}

inline std::string features_text(const BenchContext& c) {
  return c.cpu_features.empty() ? "-" : join(c.cpu_features, " ");
}

inline std::string fixed(double v, int digits) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(digits) << v;
  return s.str();
}

// The lines under a table: the model, the machine, the load, the KV cache,
// peak RSS, the repetitions and, where known, device memory in use.
inline std::string context_lines(const BenchContext& c) {
  std::ostringstream s;
  s << "model " << c.model << " (" << format_bytes(c.model_bytes) << "), cpu " << c.cpu_model
    << "\n";
  if (!c.backend_summary.empty()) s << "backend " << c.backend << ": " << c.backend_summary << "\n";
  s << "load " << fixed(c.load_seconds * 1000, 1) << " ms, KV cache "
    << format_bytes(c.kv_cache_bytes) << " (" << c.kv_cache_tokens << " tokens of "
    << c.kv_cache_dtype << "), peak RSS " << format_bytes(c.peak_rss_bytes) << ", " << c.repetitions
    << " repetitions after " << c.warmup << " warm-up run" << (c.warmup == 1 ? "" : "s")
    << (c.interleave ? ", interleaved" : "") << "\n";
  if (c.device_memory_bytes) {
    s << "device memory in use " << format_bytes(*c.device_memory_bytes) << "\n";
  }
  return s.str();
}

// Deterministic pseudo-random token ids in [0, vocab) (splitmix64), the
// same on every run and machine; each `stream` gives other ids.
inline std::vector<int32_t> bench_tokens(size_t n, int32_t vocab, uint64_t stream = 0) {
  std::vector<int32_t> ids(n);
  uint64_t state = 0x6475657462656e63ULL + stream * 0xd1b54a32d192ed03ULL;  // "duetbenc"
  for (auto& id : ids) {
    const uint64_t z = mix64(state += 0x9e3779b97f4a7c15ULL);  // SplitMix64
    id = static_cast<int32_t>(z % static_cast<uint64_t>(vocab));
  }
  return ids;
}

// A CSV field, quoted where it holds a comma, quote or newline.
inline std::string csv_field(const std::string& v) {
  if (v.find_first_of(",\"\n") == std::string::npos) return v;
  std::string out = "\"";
  for (char ch : v) out += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return out + "\"";
}

}  // namespace duet::bench
