// ngram_draft.h — draft tokens from the context itself (prompt lookup).
//
// The end of the sequence is looked up earlier in the sequence; the tokens
// that followed the earlier occurrence sharing the longest suffix with it
// (at least ngram_min tokens, counted up to ngram_max) are the draft, at
// most as many as that shared suffix is long: a long match predicts a long
// copy, a short one only a token or two. No draft model is needed, and on
// tasks that copy from their input (editing code, quoting, summarising) the
// drafts are often right. As vLLM's n-gram speculator and llama.cpp's lookup
// decoding do, with the draft length following the match length.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace duet::speculative {

struct NgramSpec {
  int32_t ngram_min = 3;   // shortest shared suffix that yields a draft
  int32_t ngram_max = 32;  // shared suffixes are compared up to this length
};

// Up to min(max_tokens, m) tokens that followed the earlier occurrence whose
// m preceding tokens equal the last m tokens of `tokens`, for the largest m
// (at most spec.ngram_max; the most recent occurrence among equals); empty
// when m < spec.ngram_min for every occurrence or max_tokens <= 0.
// REQUIRES: 1 <= spec.ngram_min <= spec.ngram_max.
// O(tokens.size() × ngram_max) at worst.
std::vector<int32_t> ngram_draft(std::span<const int32_t> tokens, const NgramSpec& spec,
                                 int32_t max_tokens);

}  // namespace duet::speculative
