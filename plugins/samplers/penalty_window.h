// penalty_window.h — the recent tokens that the penalty links
// (repetition_penalty, presence_penalty, frequency_penalty) look at.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>

#include "duet/options.h"

namespace duet::samplers {

// Reads option `last_n`, the window size, as llama.cpp's penalty_last_n:
//   n > 0: the last n tokens of SamplingContext::history, which holds the
//          prompt and the generated tokens (fewer when the history is
//          shorter); default 64;
//   0 (sentinel): off, the link changes nothing;
//   -1 (sentinel): the whole history.
int64_t read_last_n(const Options& options);

// How often each token occurs in the window of `last_n` (as above, not 0)
// tokens at the end of `history`.
std::unordered_map<int32_t, uint32_t> count_window(std::span<const int32_t> history,
                                                   int64_t last_n);

}  // namespace duet::samplers
