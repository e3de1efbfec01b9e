// bench_stats.h — summary statistics of repeated timings for `duet bench`.
// Header-only so tests can use it without linking the CLI.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace duet::bench {

struct BenchSummary {
  double median = 0.0;
  double stddev = 0.0;  // sample standard deviation (n - 1); 0 for fewer than 2 values
  double min = 0.0;
  double max = 0.0;
  double mean = 0.0;
};

// The summary of `values`; all zeros for an empty vector.
inline BenchSummary summarize_values(std::vector<double> values) {
  BenchSummary s;
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  s.min = values.front();
  s.max = values.back();
  s.median = n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2.0;
  double sum = 0.0;
  for (double v : values) sum += v;
  s.mean = sum / static_cast<double>(n);
  if (n > 1) {
    double sq = 0.0;
    for (double v : values) sq += (v - s.mean) * (v - s.mean);
    s.stddev = std::sqrt(sq / static_cast<double>(n - 1));
  }
  return s;
}

}  // namespace duet::bench
