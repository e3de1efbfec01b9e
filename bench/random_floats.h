// bench/random_floats.h — the kernel benchmarks' inputs.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace duet::bench {

// n floats uniform in [-1, 1), the same for the same seed.
inline std::vector<float> random_floats(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = uni(rng);
  return v;
}

}  // namespace duet::bench
