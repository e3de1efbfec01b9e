// duet/app/perplexity.h — how well a model predicts a text, and how closely one
// backend's next-token distributions follow another's on the same tokens.
//
// Windows: a text's token stream is scored either whole (one window,
// every position from the first) or in windows of `ctx` tokens cut as
// llama.cpp's llama-perplexity cuts them — floor(n / ctx) windows side by
// side, the rest dropped, each scoring only its second half (positions
// ctx/2 .. ctx-2 predict tokens ctx/2+1 .. ctx-1) so that every scored token
// has at least ctx/2 tokens of context. Figures from the same text, model
// and ctx can be set beside llama-perplexity's.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "duet/export.h"

namespace duet {

// exp of the mean negative log-likelihood of ids[1..n) given the logits at
// the positions before them: logits is [n, n_vocab] row-major, row i scoring
// the token after ids[i]. Computed in double with a max-subtracted softmax.
// REQUIRES: n >= 2, logits.size() == n * n_vocab, every id in [0, n_vocab).
DUET_API double perplexity(std::span<const float> logits, std::span<const int32_t> ids,
                           int32_t n_vocab);

// One window of a token stream: tokens [begin, begin + length), of which the
// logits at window positions [first_scored, length - 1) are scored against
// the token that follows each.
struct DUET_API ScoringWindow {
  int64_t begin = 0;
  int32_t length = 0;
  int32_t first_scored = 0;
};

// The windows for `n_tokens` tokens: ctx == 0 gives one window of them all
// scored from position 0; ctx > 0 the llama-perplexity windows above.
// Returns no window when there are too few tokens (fewer than 2, or than
// ctx). REQUIRES: ctx == 0 or ctx >= 4.
DUET_API std::vector<ScoringWindow> scoring_windows(int64_t n_tokens, int32_t ctx);

// What the scored positions of a text add up to, against the true next
// tokens and, when a baseline's logits are given, against the baseline.
struct DUET_API Fidelity {
  int64_t positions = 0;
  double perplexity = 0.0;        // of the logits scored
  double perplexity_base = 0.0;   // of the baseline's (0 without one)
  double perplexity_ratio = 0.0;  // perplexity / perplexity_base
  // KL(base || this) of the next-token distributions, in nats.
  double kld_mean = 0.0;
  double kld_median = 0.0;
  double kld_p99 = 0.0;
  double kld_max = 0.0;
  double top1_agreement = 0.0;  // fraction of positions with the same argmax
  // Root mean square of p(true next token) minus the baseline's p of it,
  // as llama-perplexity's "RMS Δp" (a fraction, not a percentage).
  double rms_delta_p = 0.0;
  // sum (logit - base logit)^2 / sum base logit^2 over every logit.
  double logits_nmse = 0.0;
};

// Accumulates Fidelity position by position, in double. Keeps one double per
// position (for the KLD percentiles), nothing per vocabulary entry.
class DUET_API FidelityAccumulator {
 public:
  explicit FidelityAccumulator(int32_t n_vocab) : n_vocab_(n_vocab) {}

  // Scores `logits` (n_vocab values) predicting `next`.
  // REQUIRES: next in [0, n_vocab), logits.size() == n_vocab.
  void add(std::span<const float> logits, int32_t next);
  // The same, with the baseline's logits for the same position.
  // REQUIRES: as add(), and base.size() == n_vocab; use one form throughout.
  void add(std::span<const float> logits, std::span<const float> base, int32_t next);

  // The figures so far; the baseline's are 0 when add() had no baseline.
  // REQUIRES: at least one position added.
  Fidelity result() const;
  // result().perplexity alone, without sorting the KL divergences.
  // REQUIRES: at least one position added.
  double perplexity() const;

 private:
  int32_t n_vocab_;
  int64_t positions_ = 0;
  bool with_base_ = false;
  double nll_ = 0.0, nll_base_ = 0.0;
  double same_top_ = 0.0, sum_dp2_ = 0.0;
  double sum_diff2_ = 0.0, sum_base2_ = 0.0;
  std::vector<double> kld_;
};

}  // namespace duet
