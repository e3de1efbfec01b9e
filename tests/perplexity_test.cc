// Perplexity windows and fidelity figures on small hand-made logits whose
// figures are worked out here from their definitions.
#include "duet/app/perplexity.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace duet {
namespace {

TEST(ScoringWindows, WholeTextIsOneWindowScoredFromTheStart) {
  const auto w = scoring_windows(10, 0);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].begin, 0);
  EXPECT_EQ(w[0].length, 10);
  EXPECT_EQ(w[0].first_scored, 0);
  EXPECT_TRUE(scoring_windows(1, 0).empty());
}

TEST(ScoringWindows, CtxCutsWholeWindowsAndScoresTheirSecondHalf) {
  const auto w = scoring_windows(1121, 512);  // as llama-perplexity: 2 windows, 97 tokens dropped
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[1].begin, 512);
  EXPECT_EQ(w[1].length, 512);
  EXPECT_EQ(w[1].first_scored, 256);
  EXPECT_EQ(scoring_windows(7, 4).size(), 1u);
  EXPECT_TRUE(scoring_windows(511, 512).empty());
}

// Two positions over a vocabulary of 3.
const std::vector<float> kBase = {2.0f, 1.0f, 0.0f, 0.0f, 0.5f, 3.0f};
const std::vector<float> kOther = {1.0f, 1.5f, 0.0f, 0.0f, 0.5f, 2.5f};
const std::vector<int32_t> kNext = {0, 2};

std::vector<double> softmax(const float* logits) {
  const double e[3] = {std::exp(double{logits[0]}), std::exp(double{logits[1]}),
                       std::exp(double{logits[2]})};
  const double z = e[0] + e[1] + e[2];
  return {e[0] / z, e[1] / z, e[2] / z};
}

TEST(Fidelity, FiguresFollowTheirDefinitions) {
  FidelityAccumulator acc(3);
  for (size_t i = 0; i < 2; ++i) {
    acc.add(std::span<const float>(kOther.data() + 3 * i, 3),
            std::span<const float>(kBase.data() + 3 * i, 3), kNext[i]);
  }
  const Fidelity f = acc.result();
  double nll = 0, nll_base = 0, dp2 = 0;
  std::vector<double> kld;
  for (size_t i = 0; i < 2; ++i) {
    const auto p = softmax(kOther.data() + 3 * i), b = softmax(kBase.data() + 3 * i);
    nll -= std::log(p[kNext[i]]);
    nll_base -= std::log(b[kNext[i]]);
    dp2 += (p[kNext[i]] - b[kNext[i]]) * (p[kNext[i]] - b[kNext[i]]);
    double k = 0;
    for (size_t v = 0; v < 3; ++v) k += b[v] * std::log(b[v] / p[v]);
    kld.push_back(k);
  }
  EXPECT_EQ(f.positions, 2);
  EXPECT_NEAR(f.perplexity, std::exp(nll / 2), 1e-12);
  EXPECT_NEAR(f.perplexity_base, std::exp(nll_base / 2), 1e-12);
  EXPECT_NEAR(f.perplexity_ratio, std::exp((nll - nll_base) / 2), 1e-12);
  EXPECT_NEAR(f.kld_mean, (kld[0] + kld[1]) / 2, 1e-12);
  EXPECT_NEAR(f.kld_max, std::max(kld[0], kld[1]), 1e-12);
  EXPECT_NEAR(f.kld_median, (kld[0] + kld[1]) / 2, 1e-12);  // two values: halfway
  EXPECT_NEAR(f.kld_p99, std::min(kld[0], kld[1]) + 0.99 * std::abs(kld[0] - kld[1]), 1e-12);
  EXPECT_DOUBLE_EQ(f.top1_agreement, 0.5);  // position 0: argmax 1 vs 0; position 1: 2 and 2
  EXPECT_NEAR(f.rms_delta_p, std::sqrt(dp2 / 2), 1e-12);
  // sum of squared differences 1 + 0.25 + 0.25 over sum of squares 4 + 1 + 0.25 + 9.
  EXPECT_NEAR(f.logits_nmse, 1.5 / 14.25, 1e-12);
}

TEST(Fidelity, AgainstItselfEverythingIsExact) {
  FidelityAccumulator acc(3);
  for (size_t i = 0; i < 2; ++i) {
    std::span<const float> row(kBase.data() + 3 * i, 3);
    acc.add(row, row, kNext[i]);
  }
  const Fidelity f = acc.result();
  EXPECT_EQ(f.kld_mean, 0.0);
  EXPECT_EQ(f.kld_max, 0.0);
  EXPECT_EQ(f.perplexity_ratio, 1.0);
  EXPECT_EQ(f.top1_agreement, 1.0);
  EXPECT_EQ(f.rms_delta_p, 0.0);
  EXPECT_EQ(f.logits_nmse, 0.0);
}

TEST(Fidelity, WithoutABaselineOnlyPerplexity) {
  FidelityAccumulator acc(3);
  acc.add(std::span<const float>(kBase.data(), 3), 0);
  const Fidelity f = acc.result();
  EXPECT_NEAR(f.perplexity, 1.0 / softmax(kBase.data())[0], 1e-12);
  EXPECT_EQ(f.perplexity_base, 0.0);
  EXPECT_EQ(f.kld_mean, 0.0);
}

}  // namespace
}  // namespace duet
