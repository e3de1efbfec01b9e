// duet/rng.h — counter-based random numbers for reproducible sampling.
//
// A value is a pure function of (seed, sequence, step, draw): no state is
// shared between requests, so batching or threads never change the numbers.
#pragma once

#include <cstdint>

#include "duet/export.h"

namespace duet {

// The SplitMix64 finaliser: a bijective mix with full avalanche, so nearby
// inputs give unrelated outputs. mix64(state += 0x9e3779b97f4a7c15) is the
// SplitMix64 generator, for callers that need a plain stream of numbers.
DUET_API uint64_t mix64(uint64_t z) noexcept;

// 64 well-mixed bits for the given counter.
DUET_API uint64_t counter_hash(uint64_t seed, uint64_t sequence, uint64_t step,
                               uint64_t draw) noexcept;

// A double in [0, 1) with 53 random bits for the given counter.
DUET_API double counter_uniform(uint64_t seed, uint64_t sequence, uint64_t step,
                                uint64_t draw) noexcept;

}  // namespace duet
