// duet/rng.h — counter-based random numbers for reproducible sampling.
//
// A value is a pure function of (seed, sequence, step, draw): no state is
// shared between requests, so batching or threads never change the numbers.
#pragma once

#include <cstdint>

namespace duet {

// 64 well-mixed bits for the given counter.
uint64_t counter_hash(uint64_t seed, uint64_t sequence, uint64_t step, uint64_t draw) noexcept;

// A double in [0, 1) with 53 random bits for the given counter.
double counter_uniform(uint64_t seed, uint64_t sequence, uint64_t step, uint64_t draw) noexcept;

}  // namespace duet
