#include "duet/app/perplexity.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace duet {
namespace {

// log of the softmax's denominator, max-subtracted: log sum exp(l - max) + max.
double log_sum_exp(std::span<const float> row) {
  const double max_logit = *std::max_element(row.begin(), row.end());
  double total = 0.0;
  for (float l : row) total += std::exp(double{l} - max_logit);
  return max_logit + std::log(total);
}

size_t argmax(std::span<const float> row) {
  return static_cast<size_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

// The q-quantile of sorted values, by linear interpolation between ranks.
double quantile(const std::vector<double>& sorted, double q) {
  const double at = q * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(at));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (at - static_cast<double>(lo));
}

}  // namespace

double perplexity(std::span<const float> logits, std::span<const int32_t> ids, int32_t n_vocab) {
  assert(ids.size() >= 2 && logits.size() == ids.size() * static_cast<size_t>(n_vocab));
  FidelityAccumulator acc(n_vocab);
  const auto vocab = static_cast<size_t>(n_vocab);
  for (size_t i = 0; i + 1 < ids.size(); ++i) acc.add(logits.subspan(i * vocab, vocab), ids[i + 1]);
  return acc.result().perplexity;
}

std::vector<ScoringWindow> scoring_windows(int64_t n_tokens, int32_t ctx) {
  assert(ctx == 0 || ctx >= 4);
  std::vector<ScoringWindow> out;
  if (ctx == 0) {
    if (n_tokens >= 2) out.push_back(ScoringWindow{0, static_cast<int32_t>(n_tokens), 0});
    return out;
  }
  for (int64_t begin = 0; begin + ctx <= n_tokens; begin += ctx)
    out.push_back(ScoringWindow{begin, ctx, ctx / 2});
  return out;
}

void FidelityAccumulator::add(std::span<const float> logits, int32_t next) {
  assert(logits.size() == static_cast<size_t>(n_vocab_) && next >= 0 && next < n_vocab_);
  nll_ += log_sum_exp(logits) - double{logits[static_cast<size_t>(next)]};
  ++positions_;
}

void FidelityAccumulator::add(std::span<const float> logits, std::span<const float> base,
                              int32_t next) {
  assert(logits.size() == static_cast<size_t>(n_vocab_) && base.size() == logits.size());
  assert(next >= 0 && next < n_vocab_);
  with_base_ = true;
  const double lse = log_sum_exp(logits), lse_base = log_sum_exp(base);
  const auto t = static_cast<size_t>(next);
  nll_ += lse - double{logits[t]};
  nll_base_ += lse_base - double{base[t]};
  double kld = 0.0;
  for (size_t i = 0; i < base.size(); ++i) {
    const double log_p_base = double{base[i]} - lse_base;
    const double log_p = double{logits[i]} - lse;
    kld += std::exp(log_p_base) * (log_p_base - log_p);
    const double diff = double{logits[i]} - double{base[i]};
    sum_diff2_ += diff * diff;
    sum_base2_ += double{base[i]} * double{base[i]};
  }
  kld_.push_back(std::max(kld, 0.0));  // rounding can leave a tiny negative
  same_top_ += argmax(logits) == argmax(base) ? 1.0 : 0.0;
  const double dp = std::exp(double{logits[t]} - lse) - std::exp(double{base[t]} - lse_base);
  sum_dp2_ += dp * dp;
  ++positions_;
}

double FidelityAccumulator::perplexity() const {
  assert(positions_ > 0);
  return std::exp(nll_ / static_cast<double>(positions_));
}

Fidelity FidelityAccumulator::result() const {
  assert(positions_ > 0);
  Fidelity f;
  const auto n = static_cast<double>(positions_);
  f.positions = positions_;
  f.perplexity = std::exp(nll_ / n);
  if (!with_base_) return f;
  f.perplexity_base = std::exp(nll_base_ / n);
  f.perplexity_ratio = f.perplexity / f.perplexity_base;
  std::vector<double> sorted = kld_;
  std::sort(sorted.begin(), sorted.end());
  double sum = 0.0;
  for (double k : sorted) sum += k;
  f.kld_mean = sum / n;
  f.kld_median = quantile(sorted, 0.5);
  f.kld_p99 = quantile(sorted, 0.99);
  f.kld_max = sorted.back();
  f.top1_agreement = same_top_ / n;
  f.rms_delta_p = std::sqrt(sum_dp2_ / n);
  f.logits_nmse = sum_base2_ > 0 ? sum_diff2_ / sum_base2_ : 0.0;
  return f;
}

}  // namespace duet
