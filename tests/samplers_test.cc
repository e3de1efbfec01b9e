// The standard sampler-chain links of plugins/samplers, loaded through the
// real plugin host: hand-computed cases per link, option validation, the
// seeded draw, and a chain of links.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "duet/app/plugin_host.h"
#include "duet/error.h"

namespace duet {
namespace {

using OptionList = std::vector<std::pair<std::string, std::string>>;

class SamplersTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    host_ = new PluginHost();
    PluginRecord r = host_->load(std::string(DUET_BUILD_DIR) + "/plugins/duet-samplers.so");
    ASSERT_TRUE(r.loaded) << r.refusal;
  }
  static void TearDownTestSuite() {
    delete host_;
    host_ = nullptr;
  }

  // Options as the pipeline YAML delivers them for chain item 1.
  static Options options(const std::string& link, const OptionList& values) {
    Options o("components.sampler.chain[1]." + link);
    for (const auto& [key, value] : values) o.set(key, value);
    return o;
  }

  static std::shared_ptr<Sampler> make(const std::string& link, const OptionList& values = {}) {
    return host_->create_sampler(link, options(link, values));
  }

  // The message of the duet::Error(kConfig) that creating the link throws.
  static std::string config_error(const std::string& link, const OptionList& values) {
    try {
      make(link, values);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kConfig) << e.what();
      return e.what();
    }
    ADD_FAILURE() << link << ": no duet::Error thrown";
    return "";
  }

  static Candidates apply(const std::string& link, const OptionList& values, Candidates c,
                          const SamplingContext& ctx = {}) {
    make(link, values)->apply(c, ctx);
    return c;
  }

  static PluginHost* host_;
};

PluginHost* SamplersTest::host_ = nullptr;

// id -> logit, to compare candidate lists whatever their order.
std::map<int32_t, float> pairs(const Candidates& c) {
  EXPECT_EQ(c.ids.size(), c.logits.size());
  std::map<int32_t, float> out;
  for (size_t i = 0; i < c.ids.size(); ++i) out[c.ids[i]] = c.logits[i];
  EXPECT_EQ(out.size(), c.ids.size()) << "duplicate ids";
  return out;
}

// Candidates whose probabilities are `probs`, ids given in the order listed.
Candidates with_probs(const std::vector<int32_t>& ids, const std::vector<double>& probs) {
  Candidates c;
  c.ids = ids;
  for (double p : probs) c.logits.push_back(static_cast<float>(std::log(p)));
  return c;
}

void expect_contains(const std::string& message, const std::vector<std::string>& parts) {
  for (const auto& part : parts)
    EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
}

constexpr const char* kPath = "components.sampler.chain[1].";

// --- registration ---------------------------------------------------------

TEST_F(SamplersTest, RegistersEveryLinkUnderItsName) {
  for (const char* name : {"greedy", "temperature", "top_k", "top_p", "min_p", "repetition_penalty",
                           "presence_penalty", "frequency_penalty", "logit_bias", "dist"})
    EXPECT_TRUE(host_->has(ComponentKind::kSampler, name)) << name;
  EXPECT_EQ(make("greedy")->name(), "greedy");
  EXPECT_EQ(make("top_k", {{"value", "4"}})->name(), "top_k");
  EXPECT_EQ(make("repetition_penalty", {{"value", "1.1"}})->name(), "repetition_penalty");
  EXPECT_EQ(make("logit_bias")->name(), "logit_bias");
  EXPECT_EQ(make("dist")->name(), "dist");
}

// --- greedy ---------------------------------------------------------------

TEST_F(SamplersTest, GreedySelectsArgmaxTiesToLowestId) {
  Candidates c = apply("greedy", {}, {{5, 9, 2, 7}, {1.0f, 3.0f, 3.0f, -1.0f}, -1});
  EXPECT_EQ(c.selected, 2);
  EXPECT_EQ(c.ids, std::vector<int32_t>({2}));
  EXPECT_EQ(c.logits, std::vector<float>({3.0f}));
}

// Lists up to a whole vocabulary against a plain scan by the rank order:
// the higher logit, ties to the lower id, NaN like -inf — with the ids
// shuffled, the best tied at many places, the best last, and lists of NaN
// and -inf only.
TEST_F(SamplersTest, GreedyOverAWholeVocabularyMatchesThePlainRankOrder) {
  std::mt19937 rng(7);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (size_t n : {1, 15, 16, 17, 31, 33, 64, 1000, 49152}) {
    for (int variant = 0; variant < 4; ++variant) {
      Candidates c;
      for (size_t i = 0; i < n; ++i) c.ids.push_back(static_cast<int32_t>(i));
      std::shuffle(c.ids.begin(), c.ids.end(), rng);
      std::uniform_real_distribution<float> logit(-20.0f, 20.0f);
      for (size_t i = 0; i < n; ++i) {
        const uint32_t r = rng() % 16;
        c.logits.push_back(variant == 3   ? (r % 2 ? nan : -inf)
                           : r == 0       ? nan
                           : variant == 1 ? 5.0f  // many ties at the best
                                          : logit(rng));
      }
      if (variant == 2) c.logits[n - 1] = 100.0f;  // the best in the tail
      size_t want = 0;
      for (size_t i = 1; i < n; ++i) {
        auto key = [inf](float x) { return std::isnan(x) ? -inf : x; };
        const float a = key(c.logits[i]), b = key(c.logits[want]);
        if (a > b || (a == b && c.ids[i] < c.ids[want])) want = i;
      }
      const int32_t want_id = c.ids[want];
      Candidates got = apply("greedy", {}, c);
      EXPECT_EQ(got.selected, want_id) << "n " << n << " variant " << variant;
    }
  }
}

TEST_F(SamplersTest, GreedyTakesNoOptions) {
  expect_contains(config_error("greedy", {{"k", "1"}}),
                  {std::string(kPath) + "greedy.k", "unknown option 'k'", "takes no options"});
}

// --- temperature ------------------------------------------------------------

TEST_F(SamplersTest, TemperatureTwoHalvesLogits) {
  for (const char* key : {"t", "value"}) {
    Candidates c = apply("temperature", {{key, "2"}}, {{4, 1, 8}, {2.0f, -4.0f, 1.0f}, -1});
    EXPECT_EQ(c.ids, std::vector<int32_t>({4, 1, 8})) << key;
    EXPECT_EQ(c.logits, std::vector<float>({1.0f, -2.0f, 0.5f})) << key;
    EXPECT_EQ(c.selected, -1) << key;
  }
}

TEST_F(SamplersTest, TemperatureZeroSelectsArgmax) {
  Candidates c = apply("temperature", {{"value", "0"}}, {{3, 8, 1}, {0.5f, 2.5f, 2.5f}, -1});
  EXPECT_EQ(c.selected, 1);
  EXPECT_EQ(c.ids, std::vector<int32_t>({1}));
}

TEST_F(SamplersTest, TemperatureRejectsNegativeNanAndInfinity) {
  expect_contains(config_error("temperature", {{"t", "-0.5"}}),
                  {std::string(kPath) + "temperature.t", "-0.5", "out of range", ">= 0"});
  for (const char* bad : {"nan", "inf", "-inf", "hot"})
    expect_contains(config_error("temperature", {{"value", bad}}),
                    {std::string(kPath) + "temperature.value", std::string("found '") + bad + "'",
                     "a number >= 0 (0 = greedy)"});
}

// Regression: t = 1e-39 was accepted and overflowed every logit to inf.
TEST_F(SamplersTest, TemperatureRejectsPositiveValuesTooSmallToDivideBy) {
  expect_contains(config_error("temperature", {{"t", "1e-39"}}),
                  {std::string(kPath) + "temperature.t", "too small", "use 0 for greedy"});
  EXPECT_NO_THROW(make("temperature", {{"t", "0.001"}}));
}

TEST_F(SamplersTest, TemperatureNeedsExactlyOneOfTAndValue) {
  expect_contains(config_error("temperature", {{"t", "0.7"}, {"value", "0.8"}}),
                  {std::string(kPath) + "temperature", "'t' (0.7)", "'value' (0.8)", "keep one"});
  expect_contains(config_error("temperature", {}), {std::string(kPath) + "temperature",
                                                    "missing option 't'", "'- temperature: 0.7'"});
}

// --- top_k ----------------------------------------------------------------

TEST_F(SamplersTest, TopKKeepsHighestLogitsTiesToLowerId) {
  // Unsorted ids; the third place is a tie between ids 3 and 1.
  Candidates c =
      apply("top_k", {{"k", "3"}}, {{4, 3, 0, 1, 2}, {5.0f, 1.0f, 0.0f, 1.0f, 5.0f}, -1});
  EXPECT_EQ(c.ids, std::vector<int32_t>({2, 4, 1}));
  EXPECT_EQ(c.logits, std::vector<float>({5.0f, 5.0f, 1.0f}));
  EXPECT_EQ(c.selected, -1);
}

TEST_F(SamplersTest, TopKZeroAndLargeKLeaveTheListAlone) {
  const Candidates in{{2, 0, 1}, {0.1f, 0.3f, 0.2f}, -1};
  for (const char* k : {"0", "3", "1000000000000"}) {
    Candidates c = apply("top_k", {{"value", k}}, in);
    EXPECT_EQ(c.ids, in.ids) << k;
    EXPECT_EQ(c.logits, in.logits) << k;
  }
}

TEST_F(SamplersTest, TopKValueShorthandEqualsNamedKey) {
  const Candidates in{{0, 1, 2, 3}, {1.0f, 4.0f, 3.0f, 2.0f}, -1};
  EXPECT_EQ(apply("top_k", {{"value", "2"}}, in).ids, std::vector<int32_t>({1, 2}));
  EXPECT_EQ(apply("top_k", {{"k", "2"}}, in).ids, std::vector<int32_t>({1, 2}));
}

TEST_F(SamplersTest, TopKRejectsBadValues) {
  expect_contains(
      config_error("top_k", {{"k", "-1"}}),
      {std::string(kPath) + "top_k.k", "-1 is out of range", "an integer >= 0 (0 = off)"});
  for (const char* bad : {"1.5", "forty", ""})
    expect_contains(config_error("top_k", {{"value", bad}}),
                    {std::string(kPath) + "top_k.value", std::string("found '") + bad + "'",
                     "an integer >= 0 (0 = off)"});
  expect_contains(config_error("top_k", {{"k", "4"}, {"value", "4"}}), {"keep one"});
}

TEST_F(SamplersTest, UnknownOptionGetsADidYouMean) {
  expect_contains(config_error("top_k", {{"kk", "40"}}),
                  {std::string(kPath) + "top_k.kk", "unknown option 'kk'", "did you mean 'k'?"});
  expect_contains(config_error("repetition_penalty", {{"penalty", "1.1"}, {"last_m", "8"}}),
                  {std::string(kPath) + "repetition_penalty.last_m", "did you mean 'last_n'?"});
}

// --- top_p ----------------------------------------------------------------

TEST_F(SamplersTest, TopPKeepsSmallestSetReachingP) {
  // Probabilities 0.2 / 0.5 / 0.3 for ids 7 / 3 / 5, listed unsorted.
  const Candidates in = with_probs({7, 3, 5}, {0.2, 0.5, 0.3});
  EXPECT_EQ(apply("top_p", {{"p", "0.75"}}, in).ids, std::vector<int32_t>({3, 5}));
  EXPECT_EQ(apply("top_p", {{"value", "0.75"}}, in).ids, std::vector<int32_t>({3, 5}));
  EXPECT_EQ(apply("top_p", {{"p", "0.4"}}, in).ids, std::vector<int32_t>({3}));
  EXPECT_EQ(apply("top_p", {{"p", "0.9"}}, in).ids, std::vector<int32_t>({3, 5, 7}));
}

TEST_F(SamplersTest, TopPAlwaysKeepsOneAndOneIsOff) {
  const Candidates in = with_probs({0, 1, 2}, {0.2, 0.5, 0.3});
  EXPECT_EQ(apply("top_p", {{"p", "1e-9"}}, in).ids, std::vector<int32_t>({1}));
  Candidates off = apply("top_p", {{"p", "1"}}, in);
  EXPECT_EQ(off.ids, in.ids);
  EXPECT_EQ(off.logits, in.logits);
}

TEST_F(SamplersTest, TopPRejectsOutsideZeroToOne) {
  for (const char* bad : {"0", "1.5", "-0.1"})
    expect_contains(config_error("top_p", {{"p", bad}}),
                    {std::string(kPath) + "top_p.p", std::string(bad) + " is out of range",
                     "a number in (0, 1] (1 = off)"});
  expect_contains(config_error("top_p", {{"value", "most"}}),
                  {std::string(kPath) + "top_p.value", "found 'most'", "(0, 1]"});
}

// --- min_p ----------------------------------------------------------------

TEST_F(SamplersTest, MinPKeepsCandidatesAboveAFractionOfTheBest) {
  // Probabilities 0.5 / 0.3 / 0.2: p = 0.5 keeps those >= 0.25.
  const Candidates in = with_probs({9, 4, 6}, {0.2, 0.5, 0.3});
  EXPECT_EQ(pairs(apply("min_p", {{"p", "0.5"}}, in)), pairs(with_probs({4, 6}, {0.5, 0.3})));
  EXPECT_EQ(apply("min_p", {{"value", "0.5"}}, in).ids, std::vector<int32_t>({4, 6}));
  EXPECT_EQ(apply("min_p", {{"p", "0.3"}}, in).ids, in.ids);
  EXPECT_EQ(apply("min_p", {{"p", "1"}}, in).ids, std::vector<int32_t>({4}));
  EXPECT_EQ(apply("min_p", {{"p", "0"}}, in).logits, in.logits);
}

TEST_F(SamplersTest, MinPOneKeepsEveryTiedBest) {
  Candidates c = apply("min_p", {{"p", "1"}}, {{0, 1, 2}, {2.0f, 1.0f, 2.0f}, -1});
  EXPECT_EQ(c.ids, std::vector<int32_t>({0, 2}));
}

TEST_F(SamplersTest, MinPRejectsOutsideZeroToOne) {
  for (const char* bad : {"1.1", "-0.1"})
    expect_contains(config_error("min_p", {{"p", bad}}),
                    {std::string(kPath) + "min_p.p", std::string(bad) + " is out of range",
                     "a number in [0, 1] (0 = off)"});
}

// --- penalties --------------------------------------------------------------

SamplingContext with_history(const std::vector<int32_t>& history) {
  SamplingContext ctx;
  ctx.history = history;
  return ctx;
}

TEST_F(SamplersTest, RepetitionPenaltyDividesPositiveMultipliesNegativeOncePerToken) {
  const std::vector<int32_t> history = {1, 2, 2, 7};
  const Candidates in{{3, 2, 1, 0}, {3.0f, -2.0f, 2.0f, 1.0f}, -1};
  for (const char* key : {"penalty", "value"}) {
    Candidates c = apply("repetition_penalty", {{key, "2"}}, in, with_history(history));
    // Token 2 occurs twice but is penalised once; 7 is not a candidate.
    EXPECT_EQ(pairs(c), (std::map<int32_t, float>{{0, 1.0f}, {1, 1.0f}, {2, -4.0f}, {3, 3.0f}}))
        << key;
  }
}

TEST_F(SamplersTest, RepetitionPenaltyWindowIsLastNTokens) {
  const std::vector<int32_t> history = {0, 1, 2};
  const Candidates in{{0, 1, 2}, {2.0f, 2.0f, 2.0f}, -1};
  auto run = [&](const char* last_n) {
    return apply("repetition_penalty", {{"penalty", "2"}, {"last_n", last_n}}, in,
                 with_history(history))
        .logits;
  };
  EXPECT_EQ(run("1"), std::vector<float>({2.0f, 2.0f, 1.0f}));
  EXPECT_EQ(run("2"), std::vector<float>({2.0f, 1.0f, 1.0f}));
  EXPECT_EQ(run("100"), std::vector<float>({1.0f, 1.0f, 1.0f}));
  EXPECT_EQ(run("-1"), std::vector<float>({1.0f, 1.0f, 1.0f}));
  EXPECT_EQ(run("0"), std::vector<float>({2.0f, 2.0f, 2.0f}));
}

TEST_F(SamplersTest, RepetitionPenaltyDefaultWindowIs64) {
  std::vector<int32_t> history = {5};
  history.resize(65, 6);  // token 5 is 65 tokens back
  Candidates c = apply("repetition_penalty", {{"value", "2"}}, {{5, 6}, {2.0f, 2.0f}, -1},
                       with_history(history));
  EXPECT_EQ(c.logits, std::vector<float>({2.0f, 1.0f}));
}

TEST_F(SamplersTest, RepetitionPenaltyRejectsBadValues) {
  for (const char* bad : {"0", "-1.1"})
    expect_contains(config_error("repetition_penalty", {{"penalty", bad}}),
                    {std::string(kPath) + "repetition_penalty.penalty",
                     std::string(bad) + " is out of range", "a number > 0 (1 = off)"});
  expect_contains(config_error("repetition_penalty", {{"penalty", "1.1"}, {"last_n", "-2"}}),
                  {std::string(kPath) + "repetition_penalty.last_n", "-2 is out of range",
                   "an integer >= -1 (-1 = whole history, 0 = off)"});
  expect_contains(config_error("repetition_penalty", {{"last_n", "8"}}),
                  {"missing option 'penalty'", "'- repetition_penalty: {penalty: 1.1}'"});
}

TEST_F(SamplersTest, PresencePenaltySubtractsOncePerPresentToken) {
  const std::vector<int32_t> history = {4, 4, 5};
  const Candidates in{{6, 5, 4}, {1.0f, 1.0f, 1.0f}, -1};
  for (const char* key : {"penalty", "value"}) {
    Candidates c = apply("presence_penalty", {{key, "0.5"}}, in, with_history(history));
    EXPECT_EQ(c.ids, in.ids);
    EXPECT_EQ(c.logits, std::vector<float>({1.0f, 0.5f, 0.5f})) << key;
  }
  Candidates negative =
      apply("presence_penalty", {{"penalty", "-2"}, {"last_n", "1"}}, in, with_history(history));
  EXPECT_EQ(negative.logits, std::vector<float>({1.0f, 3.0f, 1.0f}));
}

TEST_F(SamplersTest, FrequencyPenaltySubtractsPerOccurrence) {
  const std::vector<int32_t> history = {4, 4, 5, 4};
  const Candidates in{{6, 5, 4}, {1.0f, 1.0f, 1.0f}, -1};
  for (const char* key : {"penalty", "value"}) {
    Candidates c = apply("frequency_penalty", {{key, "0.5"}}, in, with_history(history));
    EXPECT_EQ(c.logits, std::vector<float>({1.0f, 0.5f, -0.5f})) << key;
  }
  Candidates window =
      apply("frequency_penalty", {{"penalty", "0.5"}, {"last_n", "2"}}, in, with_history(history));
  EXPECT_EQ(window.logits, std::vector<float>({1.0f, 0.5f, 0.5f}));
}

TEST_F(SamplersTest, AdditivePenaltiesRejectOutsideMinusTwoToTwo) {
  for (const char* link : {"presence_penalty", "frequency_penalty"}) {
    expect_contains(config_error(link, {{"penalty", "2.5"}}),
                    {std::string(kPath) + link + ".penalty", "2.5 is out of range",
                     "a number in [-2, 2] (0 = off)"});
    expect_contains(config_error(link, {{"value", "lots"}}),
                    {std::string(kPath) + link + ".value", "found 'lots'", "[-2, 2]"});
  }
}

// --- logit_bias -------------------------------------------------------------

TEST_F(SamplersTest, LogitBiasAddsAndBans) {
  Candidates c = apply("logit_bias", {{"1", "2.5"}, {"3", "-inf"}, {"99", "-100"}, {"0", "-.inf"}},
                       {{3, 2, 1, 0}, {1.0f, 1.0f, 1.0f, 1.0f}, -1});
  EXPECT_EQ(c.ids, std::vector<int32_t>({2, 1}));
  EXPECT_EQ(c.logits, std::vector<float>({1.0f, 3.5f}));
}

// The whole vocabulary in id order (where the link looks ids up at their
// own index) and a filtered, shuffled list (where some ids sit at their own
// index by chance and the others are searched for) against the rule done
// the plain way: bans out, biases added, the others in their order.
TEST_F(SamplersTest, LogitBiasOnLongListsInAnyOrder) {
  const OptionList bias = {{"0", "-inf"},   {"5", "1.5"},     {"500", "-inf"}, {"501", "2"},
                           {"999", "-inf"}, {"1000", "-inf"}, {"77", "-3"}};
  std::map<int32_t, double> by_id;
  for (const auto& [id, value] : bias) {
    by_id[std::stoi(id)] = value == "-inf" ? -INFINITY : std::stod(value);
  }
  std::mt19937 rng(5);
  std::vector<int32_t> in_order(1000);
  std::iota(in_order.begin(), in_order.end(), 0);
  std::vector<int32_t> shuffled = in_order;
  std::shuffle(shuffled.begin(), shuffled.end(), rng);
  shuffled.resize(700);
  for (int32_t id : {0, 5, 77, 501}) {  // at their own index
    const auto at = std::find(shuffled.begin(), shuffled.end(), id);
    if (at != shuffled.end()) std::iter_swap(at, shuffled.begin() + id);
  }
  for (const std::vector<int32_t>& ids : {in_order, shuffled}) {
    Candidates c{ids, {}, -1};
    std::uniform_real_distribution<float> logit(-5.0f, 5.0f);
    for (size_t i = 0; i < ids.size(); ++i) c.logits.push_back(logit(rng));
    Candidates want{{}, {}, -1};
    for (size_t i = 0; i < ids.size(); ++i) {
      const auto it = by_id.find(ids[i]);
      if (it == by_id.end()) {
        want.ids.push_back(ids[i]);
        want.logits.push_back(c.logits[i]);
      } else if (!std::isinf(it->second)) {
        want.ids.push_back(ids[i]);
        want.logits.push_back(static_cast<float>(c.logits[i] + it->second));
      }
    }
    const Candidates got = apply("logit_bias", bias, c);
    EXPECT_EQ(got.ids, want.ids) << ids.size() << " candidates";
    EXPECT_EQ(got.logits, want.logits) << ids.size() << " candidates";
  }
}

TEST_F(SamplersTest, LogitBiasBanningEveryCandidateIsAnError) {
  Candidates c{{3}, {1.0f}, -1};
  try {
    make("logit_bias", {{"3", "-inf"}})->apply(c, {});
    ADD_FAILURE() << "no duet::Error thrown";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInputRejected);
    expect_contains(e.what(), {std::string(kPath) + "logit_bias", "bans all 1 remaining"});
  }
  EXPECT_EQ(c.ids, std::vector<int32_t>({3}));
}

TEST_F(SamplersTest, LogitBiasRejectsBadIdsAndValues) {
  for (const char* bad : {"abc", "-1", "013", "+13", "1.5", "4294967296"})
    expect_contains(config_error("logit_bias", {{bad, "1"}}),
                    {std::string(kPath) + "logit_bias." + bad, "expected a token id",
                     std::string("found '") + bad + "'"});
  for (const char* bad : {"inf", "nan", "much", "+inf"})
    expect_contains(config_error("logit_bias", {{"13", bad}}),
                    {std::string(kPath) + "logit_bias.13", "or -inf to ban",
                     std::string("found '") + bad + "'"});
  expect_contains(
      config_error("logit_bias", {{"value", "5"}}),
      {std::string(kPath) + "logit_bias", "'- logit_bias: {13: -100}'", "single value '5'"});
}

// --- dist -----------------------------------------------------------------

SamplingContext at(uint64_t seed, uint64_t step) {
  SamplingContext ctx;
  ctx.seed = seed;
  ctx.step = step;
  return ctx;
}

TEST_F(SamplersTest, DistIsReproducibleAndIgnoresListOrder) {
  const Candidates forward = with_probs({0, 1, 2}, {0.5, 0.3, 0.2});
  const Candidates backward = with_probs({2, 1, 0}, {0.2, 0.3, 0.5});
  for (uint64_t step = 0; step < 50; ++step) {
    Candidates a = apply("dist", {}, forward, at(42, step));
    Candidates b = apply("dist", {}, forward, at(42, step));
    Candidates c = apply("dist", {}, backward, at(42, step));
    ASSERT_GE(a.selected, 0);
    EXPECT_EQ(a.ids, std::vector<int32_t>({a.selected}));
    EXPECT_EQ(a.selected, b.selected) << step;
    EXPECT_EQ(a.selected, c.selected) << step;
  }
}

// Draws `steps` tokens with `link` and returns each id's frequency.
std::map<int32_t, double> frequencies(Sampler& link, const Candidates& in, uint64_t seed,
                                      int steps) {
  std::map<int32_t, double> counts;
  for (int step = 0; step < steps; ++step) {
    Candidates c = in;
    link.apply(c, at(seed, static_cast<uint64_t>(step)));
    counts[c.selected] += 1.0 / steps;
  }
  return counts;
}

TEST_F(SamplersTest, DistFrequenciesMatchProbabilitiesAndSeedsDiffer) {
  const Candidates in = with_probs({0, 1, 2}, {0.5, 0.3, 0.2});
  auto dist = make("dist");
  std::vector<std::vector<int32_t>> draws;
  for (uint64_t seed : {1u, 2u, 42u}) {
    std::map<int32_t, double> f = frequencies(*dist, in, seed, 1000);
    EXPECT_NEAR(f[0], 0.5, 0.05) << seed;
    EXPECT_NEAR(f[1], 0.3, 0.05) << seed;
    EXPECT_NEAR(f[2], 0.2, 0.05) << seed;
    std::vector<int32_t> sequence;
    for (uint64_t step = 0; step < 100; ++step)
      sequence.push_back(apply("dist", {}, in, at(seed, step)).selected);
    draws.push_back(sequence);
  }
  EXPECT_NE(draws[0], draws[1]);
  EXPECT_NE(draws[0], draws[2]);
  EXPECT_NE(draws[1], draws[2]);
}

// The one draw rule at its edges: weights 1 : 1 : 2 over ids 0, 1, 2 split
// [0, 1) at 1/4 and 1/2; -inf and NaN weigh nothing; +inf logits share it
// all; every logit NaN draws nothing.
TEST(DrawFromSoftmax, SplitsTheUnitIntervalByWeightInIdOrder) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float l2 = std::log(2.0f);
  const Candidates c{{2, 0, 1}, {l2, 0.0f, 0.0f}, -1};
  EXPECT_EQ(draw_from_softmax(c, 0.0), 0);
  EXPECT_EQ(draw_from_softmax(c, 0.2499), 0);
  EXPECT_EQ(draw_from_softmax(c, 0.2501), 1);
  EXPECT_EQ(draw_from_softmax(c, 0.4999), 1);
  EXPECT_EQ(draw_from_softmax(c, 0.5001), 2);
  EXPECT_EQ(draw_from_softmax(c, std::nextafter(1.0, 0.0)), 2);
  EXPECT_EQ(draw_from_softmax(Candidates{{0, 1, 2}, {-inf, nan, 1.0f}, -1}, 0.0), 2);
  EXPECT_EQ(draw_from_softmax(Candidates{{0, 1, 2}, {-inf, nan, 1.0f}, -1}, 0.999), 2);
  EXPECT_EQ(draw_from_softmax(Candidates{{0, 1, 2}, {inf, 5.0f, inf}, -1}, 0.25), 0);
  EXPECT_EQ(draw_from_softmax(Candidates{{0, 1, 2}, {inf, 5.0f, inf}, -1}, 0.75), 2);
  EXPECT_EQ(draw_from_softmax(Candidates{{0, 1}, {nan, nan}, -1}, 0.5), -1);
}

TEST_F(SamplersTest, DistRefusesAllNaNLogits) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto dist = make("dist");
  Candidates c{{0, 1}, {nan, nan}, -1};
  EXPECT_THROW(dist->apply(c, at(1, 0)), Error);
}

TEST_F(SamplersTest, DistNeverDrawsAZeroProbability) {
  const float inf = std::numeric_limits<float>::infinity();
  const Candidates in{{0, 1, 2}, {-inf, 0.0f, -inf}, -1};
  for (uint64_t step = 0; step < 100; ++step)
    EXPECT_EQ(apply("dist", {}, in, at(7, step)).selected, 1);
}

// --- every link ---------------------------------------------------------------

struct LinkCase {
  std::string link;
  OptionList options;
};

// Each link, applied to the same (id, logit) pairs listed in two orders and
// after another link shrank the list, keeps pairs together, leaves at least
// one candidate, and gives the same pairs whatever the order.
TEST_F(SamplersTest, EveryLinkKeepsPairsInSyncAndIgnoresOrder) {
  const std::vector<LinkCase> cases = {
      {"greedy", {}},
      {"temperature", {{"value", "0"}}},
      {"temperature", {{"value", "0.7"}}},
      {"top_k", {{"value", "5"}}},
      {"top_p", {{"value", "0.6"}}},
      {"min_p", {{"value", "0.2"}}},
      {"repetition_penalty", {{"value", "1.3"}}},
      {"presence_penalty", {{"value", "0.7"}}},
      {"frequency_penalty", {{"value", "0.4"}}},
      {"logit_bias", {{"3", "-inf"}, {"8", "1.5"}}},
      {"dist", {}},
  };
  Candidates forward;
  for (int32_t id = 0; id < 20; ++id) {
    forward.ids.push_back(id);
    forward.logits.push_back(static_cast<float>((id * 7) % 11) * 0.5f - 2.0f);
  }
  Candidates backward = forward;
  std::reverse(backward.ids.begin(), backward.ids.end());
  std::reverse(backward.logits.begin(), backward.logits.end());
  Candidates shrunk = apply("top_k", {{"value", "8"}}, backward);
  const std::vector<int32_t> history = {1, 8, 8, 13, 2};

  for (const LinkCase& lc : cases) {
    SCOPED_TRACE(lc.link);
    const SamplingContext ctx = [&] {
      SamplingContext c = at(42, 3);
      c.history = history;
      return c;
    }();
    Candidates a = apply(lc.link, lc.options, forward, ctx);
    Candidates b = apply(lc.link, lc.options, backward, ctx);
    EXPECT_FALSE(a.ids.empty());
    EXPECT_EQ(pairs(a), pairs(b));
    EXPECT_EQ(a.selected, b.selected);
    if (a.selected >= 0) {
      EXPECT_EQ(a.ids, std::vector<int32_t>({a.selected}));
    }

    Candidates s = apply(lc.link, lc.options, shrunk, ctx);
    EXPECT_FALSE(s.ids.empty());
    const std::map<int32_t, float> allowed = pairs(shrunk);
    for (int32_t id : s.ids) EXPECT_EQ(allowed.count(id), 1u) << id;

    Candidates one = apply(lc.link, lc.options, {{11}, {0.25f}, -1}, ctx);
    EXPECT_EQ(one.ids, std::vector<int32_t>({11}));
  }
}

// --- a chain ----------------------------------------------------------------

// top_k 3 keeps probabilities 0.4 / 0.24 / 0.16, that is 0.5 / 0.3 / 0.2
// renormalised; top_p 0.75 keeps the first two, 0.625 / 0.375 renormalised;
// dist draws between those two only.
TEST_F(SamplersTest, ChainTopKThenTopPThenDist) {
  std::vector<std::shared_ptr<Sampler>> chain = {make("top_k", {{"value", "3"}}),
                                                 make("top_p", {{"value", "0.75"}}), make("dist")};
  const Candidates in = with_probs({4, 0, 3, 1, 2}, {0.1, 0.4, 0.16, 0.24, 0.1});
  std::map<int32_t, double> f;
  const int steps = 1000;
  for (int step = 0; step < steps; ++step) {
    Candidates c = in;
    const SamplingContext ctx = at(42, static_cast<uint64_t>(step));
    chain[0]->apply(c, ctx);
    EXPECT_EQ(c.ids, std::vector<int32_t>({0, 1, 3}));
    chain[1]->apply(c, ctx);
    EXPECT_EQ(c.ids, std::vector<int32_t>({0, 1}));
    chain[2]->apply(c, ctx);
    f[c.selected] += 1.0 / steps;
  }
  EXPECT_EQ(f.size(), 2u);
  EXPECT_NEAR(f[0], 0.625, 0.05);
  EXPECT_NEAR(f[1], 0.375, 0.05);
}

}  // namespace
}  // namespace duet
