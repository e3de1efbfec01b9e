#include "duet/rng.h"

#include "duet/sampler.h"

namespace duet {

uint64_t mix64(uint64_t z) noexcept {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t counter_hash(uint64_t seed, uint64_t sequence, uint64_t step, uint64_t draw) noexcept {
  // Chain the counter fields through the mixer; the golden-ratio increments
  // keep an all-zero counter away from the mixer's fixed point at 0.
  constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ULL;
  uint64_t h = mix64(seed + kGolden);
  h = mix64(h ^ (sequence + 2 * kGolden));
  h = mix64(h ^ (step + 3 * kGolden));
  return mix64(h ^ (draw + 4 * kGolden));
}

double counter_uniform(uint64_t seed, uint64_t sequence, uint64_t step, uint64_t draw) noexcept {
  return static_cast<double>(counter_hash(seed, sequence, step, draw) >> 11) * 0x1.0p-53;
}

double SamplingContext::uniform(uint32_t draw) const {
  return counter_uniform(seed, sequence, step, draw);
}

}  // namespace duet
