// duet/perplexity.h — how well a model predicts a text.
#pragma once

#include <cstdint>
#include <span>

namespace duet {

// exp of the mean negative log-likelihood of ids[1..n) given the logits at
// the positions before them: logits is [n, n_vocab] row-major, row i scoring
// the token after ids[i]. Computed in double with a max-subtracted softmax.
// REQUIRES: n >= 2, logits.size() == n * n_vocab, every id in [0, n_vocab).
double perplexity(std::span<const float> logits, std::span<const int32_t> ids, int32_t n_vocab);

}  // namespace duet
