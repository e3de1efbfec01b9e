// bench/random_floats.h — random inputs for the kernel benchmarks and the
// unit tests (which add bench/ to their include path).
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace duet::testdata {

// n floats uniform in [lo, hi), the same for the same seed.
inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uni(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = uni(rng);
  return v;
}

}  // namespace duet::testdata
