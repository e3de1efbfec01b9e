// Speculative decoding on the tiny random model (reference backend): the
// n-gram drafter, the lookup_decode stage against the plain decode stage,
// and the cache after Session::truncate against a run that never saw the
// dropped tokens.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>

#include "duet/app/pipeline.h"
#include "duet/app/scheduler.h"
#include "duet/error.h"
#include "engine/session_impl.h"
#include "models/model.h"
#include "ngram_draft.h"
#include "tiny_model.h"

namespace duet {
namespace {

namespace fs = std::filesystem;
using speculative::ngram_draft;
using speculative::NgramSpec;

TEST(NgramDraft, ProposesWhatFollowedTheLongestEarlierMatch) {
  // ... 1 2 3 [9 9] ... 5 2 3 [7 8 6] ... 2 3: "2 3" twice; "5 2 3" only once.
  const std::vector<int32_t> t = {1, 2, 3, 9, 9, 5, 2, 3, 7, 8, 6, 4, 5, 2, 3};
  EXPECT_EQ(ngram_draft(t, NgramSpec{2, 8}, 8), (std::vector<int32_t>{7, 8, 6}));
  EXPECT_EQ(ngram_draft(t, NgramSpec{2, 8}, 2), (std::vector<int32_t>{7, 8}));
  // A match of 2 (ngram_max) keeps the most recent occurrence: 2 3 -> 7 8.
  EXPECT_EQ(ngram_draft(t, NgramSpec{1, 2}, 8), (std::vector<int32_t>{7, 8}));
  EXPECT_TRUE(ngram_draft(t, NgramSpec{4, 8}, 8).empty());
  EXPECT_TRUE(ngram_draft(t, NgramSpec{1, 8}, 0).empty());
  EXPECT_TRUE(ngram_draft(std::vector<int32_t>{1, 2, 3}, NgramSpec{1, 8}, 8).empty());
  // A repeating sequence drafts its own continuation (the match overlaps).
  EXPECT_EQ(ngram_draft(std::vector<int32_t>{4, 4, 5, 4, 4, 5, 4}, NgramSpec{1, 8}, 8),
            (std::vector<int32_t>{4, 5, 4}));
}

class Speculative : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(testing::make_temp_dir("speculative"));
    testing::write_tiny_llama(*dir_ / "tiny.gguf");
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }

  PipelineConfig config(const std::string& decode, std::vector<std::string> overrides = {}) {
    const std::string yaml = R"(model: {path: tiny.gguf}
backend: {plugin: reference}
components:
  kv_cache: {capacity_tokens: 256, block_tokens: 4}
  sampler: {seed: 7, chain: [greedy]}
stages:
  - prefill: {}
  - )" + decode + "\n";
    PipelineConfig c = parse_pipeline_config(yaml, "test.yaml", *dir_, overrides);
    load_pipeline_plugins(c, host_);
    return c;
  }
  std::unique_ptr<Pipeline> make(const std::string& decode,
                                 std::vector<std::string> overrides = {}) {
    return Pipeline::build(config(decode, std::move(overrides)), host_);
  }

  // A prompt that repeats itself, so that drafts are found.
  static std::vector<int32_t> prompt(int32_t seed) {
    std::vector<int32_t> ids;
    for (int32_t i = 0; i < 24; ++i) ids.push_back(3 + (seed * 31 + (i % 9) * 37) % 300);
    return ids;
  }

  static inline fs::path* dir_ = nullptr;
  PluginHost host_;
  NullSink sink_;
};

// The random model rarely repeats itself, so its drafts are mostly rejected
// (the rollback path); speculative_model_test sees long drafts kept.
TEST_F(Speculative, LookupDecodeGivesThePlainDecodeTokensGreedyAndSampled) {
  for (const std::string chain : {"[greedy]", "[{top_k: 40}, {temperature: 0.9}]"}) {
    const std::vector<std::string> set = {"components.sampler.chain=" + chain};
    auto plain = make("decode: {max_new_tokens: 160}", set);
    auto spec = make("lookup_decode: {max_new_tokens: 160, ngram_min: 1, draft_tokens: 6}", set);
    for (int32_t seed = 0; seed < 6; ++seed) {
      RunResult a = plain->run_tokens(prompt(seed), sink_);
      RunResult b = spec->run_tokens(prompt(seed), sink_);
      EXPECT_EQ(a.generated_tokens, b.generated_tokens) << chain << ", prompt " << seed;
      EXPECT_EQ(a.text, b.text);
      EXPECT_EQ(a.finish, b.finish);
      EXPECT_EQ(a.stats.decode_passes, a.stats.generated_tokens - 1);
    }
  }
}

// Under the batching scheduler: 24 requests side by side, each verifying
// its own drafts in the shared passes (draft_rows lifted so that all of
// them draft), get the tokens and logits the plain decode loop gives them
// (the scheduler with stage decode, and the session path for some), with a
// roomy pool and with one small enough to preempt.
TEST_F(Speculative, TheSchedulerVerifiesEverySequencesDraftsAsItsPlainDecode) {
  for (const std::string chain : {"[greedy]", "[{top_k: 40}, {temperature: 0.9}]"}) {
    for (const std::string capacity : {"256", "96"}) {
      const std::vector<std::string> set = {
          "components.sampler.chain=" + chain, "components.kv_cache.capacity_tokens=" + capacity,
          "batching.max_sequences=24", "batching.draft_rows=65536"};
      auto plain = make("decode: {max_new_tokens: 40}", set);
      auto spec = make("lookup_decode: {max_new_tokens: 40, ngram_min: 1, draft_tokens: 6}", set);
      const auto run = [](Pipeline& pipeline, SchedulerStats& stats) {
        Scheduler scheduler(pipeline);
        for (int32_t i = 0; i < 24; ++i) {
          Request r;
          r.id = std::to_string(i);
          r.prompt = prompt(i % 8);  // some prompts twice: prefix-cache hits too
          r.settings.seed = 100 + static_cast<uint64_t>(i);
          r.settings.keep_logits = true;
          scheduler.submit(std::move(r));
        }
        scheduler.run();
        EXPECT_EQ(scheduler.used_blocks(), 0);
        stats = scheduler.stats();
        std::map<std::string, RequestResult> out;
        for (RequestResult& r : scheduler.take_finished()) out[r.id] = std::move(r);
        return out;
      };
      SchedulerStats plain_stats, spec_stats;
      const auto expected = run(*plain, plain_stats);
      const auto got = run(*spec, spec_stats);
      const std::string where = chain + ", capacity " + capacity;
      ASSERT_EQ(got.size(), 24u) << where;
      for (const auto& [id, r] : got) {
        const RequestResult& e = expected.at(id);
        EXPECT_EQ(r.generated_tokens, e.generated_tokens) << where << ", request " << id;
        EXPECT_EQ(r.text, e.text) << where << ", request " << id;
        EXPECT_EQ(r.finish, e.finish) << where << ", request " << id;
        EXPECT_EQ(r.logits, e.logits) << where << ", request " << id;
      }
      EXPECT_EQ(plain_stats.draft_tokens, 0);
      EXPECT_GT(spec_stats.draft_tokens, 0) << where;
      // Greedy, the random model repeats itself enough for drafts to be
      // kept; sampled, they are all rejected (the rollback path).
      if (chain == "[greedy]" && capacity == "256") {
        EXPECT_GT(spec_stats.accepted_draft_tokens, 0) << where;
        EXPECT_LT(spec_stats.steps, plain_stats.steps) << where << ": kept drafts save passes";
      }
      if (capacity == "96") {
        EXPECT_GT(spec_stats.preemptions, 0) << where;
      }
      // The session path, seed for seed.
      auto alone =
          make("decode: {max_new_tokens: 40}", {set[0], "components.sampler.seed=105", set[1]});
      EXPECT_EQ(alone->run_tokens(prompt(5), sink_).generated_tokens, got.at("5").generated_tokens)
          << where;
    }
  }
}

// batching.draft_rows 0 runs no drafts, and any bound keeps the plain
// loop's tokens (the random model drafts little: speculative_model_test
// checks the bound where drafts are long).
TEST_F(Speculative, DraftRowsBoundTheDraftsOfAStep) {
  const auto run = [&](const std::string& decode, const std::string& draft_rows) {
    auto pipeline = make(decode, {"batching.draft_rows=" + draft_rows});
    Scheduler scheduler(*pipeline);
    Request r;
    r.id = "0";
    r.prompt = prompt(3);
    scheduler.submit(std::move(r));
    scheduler.run();
    std::vector<RequestResult> done = scheduler.take_finished();
    EXPECT_EQ(done.size(), 1u);
    return std::make_pair(done.at(0).generated_tokens, scheduler.stats());
  };
  const std::string lookup = "lookup_decode: {max_new_tokens: 80, ngram_min: 1, draft_tokens: 6}";
  const auto [plain, plain_stats] = run("decode: {max_new_tokens: 80}", "16");
  const auto [wide, wide_stats] = run(lookup, "16");
  const auto [narrow, narrow_stats] = run(lookup, "2");
  const auto [none, none_stats] = run(lookup, "0");
  EXPECT_EQ(wide, plain);
  EXPECT_EQ(narrow, plain);
  EXPECT_EQ(none, plain);
  EXPECT_GT(wide_stats.draft_tokens, 0);
  EXPECT_LE(narrow_stats.draft_tokens, narrow_stats.steps);
  EXPECT_EQ(none_stats.draft_tokens, 0);
  EXPECT_EQ(none_stats.steps, plain_stats.steps);
}

TEST_F(Speculative, LookupDecodeStopsWhereDecodeStops) {
  // A stop string, max_new_tokens and a full cache, each reached mid-draft.
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"decode: {max_new_tokens: 13}", "lookup_decode: {max_new_tokens: 13, ngram_min: 1}"},
      {"decode: {max_new_tokens: 300}", "lookup_decode: {max_new_tokens: 300, ngram_min: 1}"},
  };
  for (const auto& [plain_stage, spec_stage] : cases) {
    auto plain = make(plain_stage, {"components.kv_cache.capacity_tokens=64"});
    auto spec = make(spec_stage, {"components.kv_cache.capacity_tokens=64"});
    RunResult a = plain->run_tokens(prompt(1), sink_);
    RunResult b = spec->run_tokens(prompt(1), sink_);
    EXPECT_EQ(a.generated_tokens, b.generated_tokens) << spec_stage;
    EXPECT_EQ(a.finish, FinishReason::kLength);
    EXPECT_EQ(b.finish, FinishReason::kLength);
  }
  auto probe = make("decode: {max_new_tokens: 40}");
  const std::string text = probe->run_tokens(prompt(2), sink_).text;
  // Two ASCII bytes well into the text, so the stop string is whole characters.
  size_t at = 8;
  auto ascii = [](char ch) { return ch >= 0x20 && ch < 0x7f && ch != '\''; };
  while (at + 1 < text.size() && !(ascii(text[at]) && ascii(text[at + 1]))) ++at;
  ASSERT_LT(at + 1, text.size()) << "the tiny model should produce some ASCII text: " << text;
  const std::string stop = "stop: '" + text.substr(at, 2) + "'}";
  RunResult a = make("decode: {max_new_tokens: 40, " + stop)->run_tokens(prompt(2), sink_);
  RunResult b = make("lookup_decode: {max_new_tokens: 40, ngram_min: 1, " + stop)
                    ->run_tokens(prompt(2), sink_);
  EXPECT_EQ(a.finish, FinishReason::kStop);
  EXPECT_EQ(a.text, b.text);
  EXPECT_EQ(a.generated_tokens, b.generated_tokens);
  EXPECT_EQ(b.finish, FinishReason::kStop);
}

TEST_F(Speculative, BadOptionsAreRefusedNamingTheKey) {
  for (const auto& [stage, needle] : std::vector<std::pair<std::string, std::string>>{
           {"lookup_decode: {draft_tokens: 0}", "draft_tokens"},
           {"lookup_decode: {ngram_min: 5, ngram_max: 4}", "ngram_min"},
           {"lookup_decode: {stop: \"\"}", "stop"},
           {"lookup_decode: {drafts: 3}", "drafts"}}) {
    try {
      make(stage);
      ADD_FAILURE() << stage << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kConfig);
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  }
}

// A session built by hand, so that the test can read its KV cache.
struct Rig {
  Rig(const PipelineConfig& config, PluginHost& host) {
    const PipelineCheck c = check_pipeline(config, host);
    file = std::make_shared<const GgufFile>(GgufFile::open(config.model.path));
    tokenizer = load_tokenizer(*file);
    backend = host.create_backend(c.backend, c.backend_options);
    model = make_model(file, c.hparams, *backend);
    kv = backend->create_kv_cache(c.kv_cache);
    allocator = std::make_unique<KVAllocator>(c.kv_cache.capacity_tokens, c.kv_cache.block_tokens);
    const ModelHParams& h = c.hparams;
    attention = backend->create_attention(
        c.attention_impl,
        AttentionSpec{h.n_heads, h.n_kv_heads, h.head_dim, 1.0f / std::sqrt(float(h.head_dim))});
  }
  std::unique_ptr<Session> session(std::span<const int32_t> prompt) {
    return std::make_unique<Session>(std::make_unique<Session::Impl>(
        *model, *kv, *allocator, kSequence, *attention,
        std::make_unique<SamplerChain>(7, std::vector<std::shared_ptr<Sampler>>{}), *tokenizer,
        sink, prompt));
  }
  // The cache rows of the session's positions [0, n), in position order.
  std::vector<uint8_t> rows(int32_t n) {
    std::vector<uint8_t> all;
    kv->export_slots(kv->spec().capacity_tokens, all);
    const size_t per_part = all.size() / (2 * static_cast<size_t>(kv->spec().n_layers));
    const size_t row = per_part / static_cast<size_t>(kv->spec().capacity_tokens);
    std::vector<uint8_t> out;
    for (size_t part = 0; part < all.size() / per_part; ++part) {
      for (int32_t p = 0; p < n; ++p) {
        const auto slot = static_cast<size_t>(allocator->slot(kSequence, p));
        const auto* at = all.data() + part * per_part + slot * row;
        out.insert(out.end(), at, at + row);
      }
    }
    return out;
  }

  std::shared_ptr<const GgufFile> file;
  std::unique_ptr<Tokenizer> tokenizer;
  std::shared_ptr<Backend> backend;
  std::unique_ptr<Model> model;
  std::unique_ptr<KVCache> kv;
  std::unique_ptr<KVAllocator> allocator;
  std::unique_ptr<Attention> attention;
  static constexpr int32_t kSequence = 0;
  NullSink sink;
};

TEST_F(Speculative, TruncateLeavesTheCacheAsARunThatNeverSawTheDroppedTokens) {
  for (const std::string dtype : {"f32", "f16"}) {  // q8_0 needs head_dim >= 32
    Rig rig(config("decode: {}", {"components.kv_cache.dtype=" + dtype}), host_);
    const std::vector<int32_t> p = prompt(3);  // 24 tokens: 6 blocks of 4
    const auto n = static_cast<int32_t>(p.size());
    const std::vector<int32_t> kept = {11, 12, 13}, rejected = {200, 201, 202, 203, 204, 205, 206};

    std::vector<uint8_t> expected;
    std::vector<float> expected_logits;
    int64_t expected_room = 0;
    {
      auto s = rig.session(p);
      s->forward(n, false);
      for (int32_t t : kept) s->append(t);
      s->forward(3, true);
      s->append(42);
      s->forward(1, false);
      expected = rig.rows(n + 4);
      expected_logits.assign(s->logits().begin(), s->logits().end());
      expected_room = s->room();
    }
    auto s = rig.session(p);
    s->forward(n, false);
    for (int32_t t : kept) s->append(t);
    for (int32_t t : rejected) s->append(t);
    s->forward(10, true);  // 34 positions: 9 blocks
    const int64_t room_before = s->room();
    s->truncate(n + 3);
    EXPECT_EQ(s->cached(), n + 3);
    EXPECT_EQ(s->room(), room_before + 7) << "7 dropped positions, 1 block back";
    // Row 2 (the last kept token) survives truncation, row 3 does not.
    EXPECT_NO_THROW(s->sample(2));
    EXPECT_THROW(s->sample(3), Error);
    s->append(42);
    s->forward(1, false);
    EXPECT_EQ(s->room(), expected_room);
    EXPECT_EQ(rig.rows(n + 4), expected) << dtype;
    ASSERT_EQ(s->logits().size(), expected_logits.size());
    EXPECT_TRUE(std::equal(expected_logits.begin(), expected_logits.end(), s->logits().begin()))
        << dtype;
  }
}

TEST_F(Speculative, TruncateRefusesToDropThePromptOrGrow) {
  Rig rig(config("decode: {}"), host_);
  auto s = rig.session(prompt(0));
  s->forward(24, false);
  s->append(5);
  EXPECT_THROW(s->truncate(23), Error);
  EXPECT_THROW(s->truncate(26), Error);
  s->truncate(24);
  EXPECT_EQ(s->tokens().size(), 24u);
  EXPECT_EQ(s->cached(), 24);
}

TEST_F(Speculative, SampleOfARowDrawsWhatAOneTokenForwardWouldDraw) {
  // A seeded draw from each row of a several-token forward equals the draw
  // after one-token forwards up to that row: same history and RNG counter.
  auto p = make("decode: {}", {"components.sampler.chain=[]"});
  const std::vector<int32_t> ids = prompt(4);
  const std::vector<int32_t> next = {17, 18, 19, 20};
  std::vector<int32_t> one_by_one, batched;
  {
    auto s = p->new_session(ids, sink_);
    s->forward(24, false);
    for (int32_t t : next) {
      s->append(t);
      s->forward(1, false);
      one_by_one.push_back(s->sample());
    }
  }
  auto s = p->new_session(ids, sink_);
  s->forward(24, false);
  for (int32_t t : next) s->append(t);
  s->forward(4, true);
  for (int32_t row = 0; row < 4; ++row) batched.push_back(s->sample(row));
  EXPECT_EQ(batched, one_by_one);
}

}  // namespace
}  // namespace duet
