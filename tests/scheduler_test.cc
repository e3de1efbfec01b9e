// The batching scheduler on the tiny random model, on each backend whose
// arithmetic for a row depends on that row's sequence only — reference,
// onednn in batch-invariant mode, and cuda in batch-invariant mode where a
// GPU is usable (else skipped with the cuda plugin's reason; its decode
// steps of several sequences replay CUDA graphs): a batched request must give
// exactly the tokens and logits it gives alone, under memory pressure
// (preemption), with its prompt taken from the prefix cache, and after
// cancellations; the pool must end with every block free.
#include "duet/app/scheduler.h"

#include <gtest/gtest.h>
#include <malloc.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <ostream>
#include <random>

#include "duet/app/pipeline.h"
#include "duet/app/token_logprobs.h"
#include "duet/error.h"
#include "scheduler_runs.h"
#include "tiny_model.h"

namespace duet {
namespace {

namespace fs = std::filesystem;

// Each case's backend: its plugin and the pipeline's backend line.
struct SchedulerBackend {
  const char* name;
  const char* plugin;
  const char* yaml;
};

void PrintTo(const SchedulerBackend& b, std::ostream* os) { *os << b.name; }

const SchedulerBackend kBackends[] = {
    {"reference", "reference", "{plugin: reference}"},
    {"onednn_batch_invariant", "onednn",
     "{plugin: onednn, options: {threads: 2, batch_invariant: true}}"},
    {"cuda_batch_invariant", "cuda", "{plugin: cuda, options: {batch_invariant: true}}"},
};

class SchedulerTest : public ::testing::TestWithParam<SchedulerBackend> {
 public:
  static void SetUpTestSuite() {
    dir_ = new fs::path(testing::make_temp_dir("scheduler"));
    testing::write_tiny_llama(*dir_ / "tiny.gguf");
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }

 protected:
  // Skips, saying why, where the case's plugin is not built or refuses to
  // load here (cuda without a usable GPU).
  void SetUp() override {
    if (const std::string why = testing::backend_unavailable(host_, *dir_, GetParam().plugin);
        !why.empty())
      GTEST_SKIP() << why;
  }

  // A sampling chain, so that a token depends on the seed and the RNG as
  // well as on the logits.
  std::unique_ptr<Pipeline> make(std::vector<std::string> overrides = {},
                                 const std::string& stages = "[prefill: {}, decode: {}]") {
    const std::string yaml = std::string("model: {path: tiny.gguf}\nbackend: ") + GetParam().yaml +
                             R"(
components:
  kv_cache: {capacity_tokens: 256, block_tokens: 4}
  sampler: {seed: 7, chain: [{top_k: 40}, {temperature: 0.9}]}
batching: {max_sequences: 32, max_step_tokens: 64}
stages: )" + stages + "\n";
    PipelineConfig c = parse_pipeline_config(yaml, "test.yaml", *dir_, overrides);
    load_pipeline_plugins(c, host_);
    return Pipeline::build(c, host_);
  }

  // The same on two backends (`backends:`): prompts prefilled by the case's
  // backend into an f32 cache, decoded by the reference backend from an f16
  // one, each sequence's blocks moving between the caches.
  std::unique_ptr<Pipeline> make_split(std::vector<std::string> overrides = {}) {
    std::string first = GetParam().yaml;
    first.insert(first.size() - 1, ", kv_cache: {dtype: f32}");
    const std::string yaml = "model: {path: tiny.gguf}\nbackends:\n  first: " + first + R"(
  second: {plugin: reference, kv_cache: {dtype: f16}}
components:
  kv_cache: {capacity_tokens: 256, block_tokens: 4}
  sampler: {seed: 7, chain: [{top_k: 40}, {temperature: 0.9}]}
batching: {max_sequences: 32, max_step_tokens: 64}
stages: [prefill: {backend: first}, decode: {backend: second}]
)";
    PipelineConfig c = parse_pipeline_config(yaml, "split.yaml", *dir_, overrides);
    load_pipeline_plugins(c, host_);
    return Pipeline::build(c, host_);
  }

  // Prompt `i`: its own length and tokens (ids of the byte range).
  static std::vector<int32_t> prompt(int32_t i, int32_t length) {
    std::vector<int32_t> ids;
    for (int32_t p = 0; p < length; ++p) ids.push_back(3 + (i * 53 + p * 29) % 250);
    return ids;
  }

  static Request request(int32_t i, std::vector<int32_t> prompt, int32_t max_new_tokens) {
    Request r;
    r.id = std::to_string(i);
    r.prompt = std::move(prompt);
    r.settings.seed = 100 + static_cast<uint64_t>(i);
    r.settings.max_new_tokens = max_new_tokens;
    r.settings.keep_logits = true;
    return r;
  }

  // `n` requests of prompts 1..40 tokens long and 4..12 new tokens.
  static std::vector<Request> varied_requests(int32_t n) {
    std::vector<Request> out;
    for (int32_t i = 0; i < n; ++i)
      out.push_back(request(i, prompt(i, 1 + (i * 7) % 40), 4 + i % 9));
    return out;
  }

  static std::map<std::string, RequestResult> run_all(Pipeline& pipeline,
                                                      const std::vector<Request>& requests,
                                                      SchedulerStats* stats = nullptr) {
    return testing::run_all(pipeline, requests, stats);
  }

  static void expect_same(const RequestResult& batched, const RequestResult& alone) {
    testing::expect_same_result(batched, alone);
  }

  // The session path (Pipeline::run_tokens) of a pipeline `make_with(sets)`
  // builds with request i's seed and max_new_tokens draws the tokens its
  // batched run drew, for each i of `which`.
  template <typename Make>
  static void expect_session_draws_the_same(Make make_with, const std::vector<Request>& requests,
                                            const std::map<std::string, RequestResult>& batched,
                                            std::initializer_list<int32_t> which) {
    for (int32_t i : which) {
      const Request& request = requests[static_cast<size_t>(i)];
      auto p = make_with(std::vector<std::string>{
          "components.sampler.seed=" + std::to_string(*request.settings.seed),
          "stages.1.decode.max_new_tokens=" + std::to_string(*request.settings.max_new_tokens)});
      NullSink sink;
      const RunResult r = p->run_tokens(request.prompt, sink);
      EXPECT_EQ(r.generated_tokens, batched.at(request.id).generated_tokens) << i;
    }
  }

  static inline fs::path* dir_ = nullptr;
  PluginHost host_;
};

// 32 requests of different lengths batched, against each one run alone by
// the scheduler and by the plain session path (Pipeline::run_tokens).
TEST_P(SchedulerTest, BatchedRequestsGiveWhatEachGivesAlone) {
  auto pipeline = make();
  const std::vector<Request> requests = varied_requests(32);
  SchedulerStats stats;
  const auto batched = run_all(*pipeline, requests, &stats);
  ASSERT_EQ(batched.size(), 32u);
  EXPECT_GT(stats.peak_running, 8) << "the requests should have run side by side";
  for (int32_t i = 0; i < 32; ++i) {
    const auto alone = run_all(*pipeline, {requests[static_cast<size_t>(i)]});
    expect_same(batched.at(std::to_string(i)), alone.at(std::to_string(i)));
  }
  expect_session_draws_the_same([&](auto sets) { return make(sets); }, requests, batched,
                                {0, 5, 31});
}

// A pool of 16 blocks of 4 tokens for 8 requests of ~30 positions each: the
// scheduler must preempt, and every request must still end as it would
// without pressure.
TEST_P(SchedulerTest, PreemptionUnderASmallPoolChangesNoToken) {
  auto roomy = make();
  auto small = make({"components.kv_cache.capacity_tokens=64", "batching.max_sequences=8"});
  std::vector<Request> requests;
  for (int32_t i = 0; i < 8; ++i) {
    requests.push_back(request(i, prompt(i, 10 + i), 20));
    requests.back().settings.ignore_end_of_generation = true;
  }
  const auto expected = run_all(*roomy, requests);
  SchedulerStats stats;
  const auto pressed = run_all(*small, requests, &stats);
  EXPECT_GT(stats.preemptions, 0) << "the pool was meant to run out";
  ASSERT_EQ(pressed.size(), 8u);
  for (const auto& [id, r] : pressed) {
    expect_same(r, expected.at(id));
    EXPECT_EQ(r.generated_tokens.size(), 20u) << id;
  }
}

// A prompt that starts with another's cached blocks prefills only the rest,
// and its logits are those of a run with prefix caching off.
TEST_P(SchedulerTest, PrefixSharingGivesTheLogitsOfNoSharing) {
  auto shared = make();
  auto unshared = make({"batching.prefix_caching=false"});
  const std::vector<int32_t> base = prompt(1, 40);
  std::vector<int32_t> longer = base;
  for (int32_t t : prompt(2, 7)) longer.push_back(t);
  std::vector<Request> requests = {request(0, base, 6)};
  // The same prompt again (all 40 positions cached: the last block is
  // copied before its last position is recomputed), and a longer one.
  const std::vector<Request> later = {request(1, base, 6), request(2, longer, 6)};

  Scheduler scheduler(*shared);
  scheduler.submit(requests[0]);
  scheduler.run();
  for (const Request& r : later) scheduler.submit(r);
  scheduler.run();
  std::map<std::string, RequestResult> got;
  for (RequestResult& r : scheduler.take_finished()) got[r.id] = std::move(r);
  EXPECT_EQ(got.at("0").cached_prompt_tokens, 0);
  EXPECT_EQ(got.at("1").cached_prompt_tokens, 39) << "all but the last prompt position";
  EXPECT_EQ(got.at("2").cached_prompt_tokens, 40);
  EXPECT_EQ(scheduler.stats().prefix_hit_tokens, 79);

  requests.insert(requests.end(), later.begin(), later.end());
  const auto expected = run_all(*unshared, requests);
  for (const auto& [id, r] : got) expect_same(r, expected.at(id));
}

// Stages on two backends: prefill steps run on the first, decode steps on
// the second, in the same scheduler step; each sequence's blocks move when
// it starts decoding. Every request gets the tokens and logits it gets
// alone, and the tokens the session path (whole-sequence handover) gives.
TEST_P(SchedulerTest, SplitBackendsGiveWhatEachGivesAlone) {
  auto pipeline = make_split();
  const std::vector<Request> requests = varied_requests(16);
  SchedulerStats stats;
  const auto batched = run_all(*pipeline, requests, &stats);
  ASSERT_EQ(batched.size(), 16u);
  EXPECT_GT(stats.peak_running, 4) << "the requests should have run side by side";
  EXPECT_GE(stats.kv_moves, 16) << "each request's blocks move to the decode backend";
  uint64_t moved = 0;
  for (int32_t i = 0; i < 16; ++i) {
    const RequestResult& r = batched.at(std::to_string(i));
    // The prompt's positions, as f32 rows of 2 heads of 16 (K and V, 2 layers).
    EXPECT_EQ(r.kv_moved_bytes, uint64_t{2} * 2 * r.prompt_tokens.size() * 2 * 16 * 4) << i;
    moved += r.kv_moved_bytes;
    const auto alone = run_all(*pipeline, {requests[static_cast<size_t>(i)]});
    expect_same(r, alone.at(std::to_string(i)));
  }
  EXPECT_EQ(stats.kv_moved_bytes, moved);
  // A prompt of 8-token chunks and one row more: its last row still runs
  // on the prefill backend (all 17 positions move), not with the decode rows.
  auto chunked = make_split({"stages.0.prefill.chunk_tokens=8"});
  const auto last_row =
      run_all(*chunked, {request(0, prompt(3, 17), 4), request(1, prompt(4, 9), 4)});
  for (const auto& [id, r] : last_row) {
    EXPECT_EQ(r.kv_moved_bytes, uint64_t{2} * 2 * r.prompt_tokens.size() * 2 * 16 * 4) << id;
  }
  expect_session_draws_the_same([&](auto sets) { return make_split(sets); }, requests, batched,
                                {0, 6, 15});
}

// Under split backends, preemption (a sequence's blocks freed and its
// positions prefilled again, then moved again) and cached prefix blocks (the
// prefill backend's copy of a block the decode backend wrote last) change
// no token.
TEST_P(SchedulerTest, SplitBackendsUnderPreemptionAndPrefixSharing) {
  auto roomy = make_split({"batching.prefix_caching=false"});
  auto small = make_split({"components.kv_cache.capacity_tokens=64", "batching.max_sequences=8"});
  std::vector<Request> requests;
  for (int32_t i = 0; i < 8; ++i) {
    requests.push_back(request(i, prompt(i % 4, 10 + 4 * (i % 4)), 20));
    requests.back().settings.ignore_end_of_generation = true;
  }
  const auto expected = run_all(*roomy, requests);
  SchedulerStats stats;
  const auto pressed = run_all(*small, requests, &stats);
  EXPECT_GT(stats.preemptions, 0) << "the pool was meant to run out";
  ASSERT_EQ(pressed.size(), 8u);
  for (const auto& [id, r] : pressed) expect_same(r, expected.at(id));

  // A prompt that continues a finished request's text attaches its blocks,
  // those the decode backend wrote included: they move back to the prefill
  // backend, as a chat's next turn moves them in a session — same tokens,
  // same bytes moved.
  const std::vector<std::string> greedy = {"components.sampler.chain=[greedy]",
                                           "stages.1.decode.max_new_tokens=12"};
  auto shared = make_split(greedy);
  Scheduler scheduler(*shared);
  // The first prompt whose greedy answer has no end token, so that 20
  // positions are cached.
  Request first;
  RequestResult answer;
  for (int32_t i = 0; i < 40 && answer.generated_tokens.size() != 12; ++i) {
    first = request(0, prompt(i, 9), 12);
    scheduler.submit(first);
    scheduler.run();
    answer = std::move(scheduler.take_finished().at(0));
  }
  ASSERT_EQ(answer.generated_tokens.size(), 12u);
  const std::vector<int32_t> extra = prompt(2, 5);
  std::vector<int32_t> next = first.prompt;
  next.insert(next.end(), answer.generated_tokens.begin(), answer.generated_tokens.end());
  next.insert(next.end(), extra.begin(), extra.end());
  scheduler.submit(request(1, next, 12));
  scheduler.run();
  const RequestResult second = std::move(scheduler.take_finished().at(0));
  EXPECT_EQ(second.cached_prompt_tokens, 20) << "5 whole blocks, 11 written by the decode backend";

  // The same two turns as a chat keeps them: the first request holds its
  // sequence and the second continues it on its cache.
  auto chat = make_split(greedy);
  Request held = first;
  held.settings.hold = true;
  const RequestResult turn1 = chat->engine().run_one(held);
  EXPECT_EQ(turn1.generated_tokens, answer.generated_tokens);
  Request next_turn = request(1, extra, 12);
  next_turn.continues = turn1.handle;
  const RequestResult turn2 = chat->engine().run_one(next_turn);
  EXPECT_EQ(second.generated_tokens, turn2.generated_tokens);
  EXPECT_GT(turn2.kv_moved_bytes, 0u);
  EXPECT_EQ(second.kv_moved_bytes, turn2.kv_moved_bytes);
}

TEST_P(SchedulerTest, PerRequestSettingsApply) {
  auto pipeline = make({"stages.1.decode.max_new_tokens=30"});
  Scheduler scheduler(*pipeline);
  Request a = request(0, prompt(0, 5), 3);
  Request b = request(1, prompt(1, 5), 3);
  b.settings.max_new_tokens.reset();  // the decode stage's 30
  b.settings.ignore_end_of_generation = true;
  Request greedy = request(2, prompt(2, 5), 8);
  greedy.settings.sampler["top_k"]["value"] = "1";
  scheduler.submit(a);
  scheduler.submit(b);
  scheduler.submit(greedy);
  scheduler.run();
  std::map<std::string, RequestResult> got;
  for (RequestResult& r : scheduler.take_finished()) got[r.id] = std::move(r);
  EXPECT_EQ(got.at("0").generated_tokens.size(), 3u);
  EXPECT_EQ(got.at("1").generated_tokens.size(), 30u);
  // top_k 1 draws the largest logit of each row.
  const RequestResult& g = got.at("2");
  const auto vocab = g.logits.size() / g.generated_tokens.size();
  for (size_t t = 0; t < g.generated_tokens.size(); ++t) {
    const float* row = g.logits.data() + t * vocab;
    EXPECT_EQ(g.generated_tokens[t], std::max_element(row, row + vocab) - row) << t;
  }
}

// A request whose sampler chain throws (a plugin link) ends alone, failed
// and naming the link; the requests batched with it give what they give
// without it.
TEST_P(SchedulerTest, ARequestWhoseChainThrowsFailsAlone) {
  const std::vector<std::string> sets = {
      "plugins.paths=[" DUET_TEST_PLUGIN_DIR "]",
      "components.sampler.chain=[{test_throw: {from_step: 1000000}}, {top_k: 40}, "
      "{temperature: 0.9}]"};
  auto pipeline = make(sets);
  std::vector<Request> requests = varied_requests(8);
  const std::map<std::string, RequestResult> alone = run_all(*pipeline, requests);
  requests[3].settings.sampler["test_throw"]["from_step"] = "2";
  const std::map<std::string, RequestResult> got = run_all(*pipeline, requests);
  const RequestResult& failed = got.at("3");
  EXPECT_EQ(failed.finish, FinishReason::kFailed);
  EXPECT_EQ(failed.generated_tokens,
            std::vector<int32_t>(alone.at("3").generated_tokens.begin(),
                                 alone.at("3").generated_tokens.begin() + 2));
  EXPECT_EQ(failed.error_kind, ErrorKind::kInputRejected);
  EXPECT_NE(failed.error.find("sampler 'test_throw' (plugin 'test-good', "
                              "components.sampler.chain[0]): test_throw rejects step 2"),
            std::string::npos)
      << failed.error;
  EXPECT_STREQ(finish_reason_name(failed.finish), "failed");
  for (const auto& [id, r] : got) {
    if (id != "3") expect_same(r, alone.at(id));
  }
}

// Requests with the same prompt submitted together: the second waits a step
// and attaches the first's blocks instead of computing them again.
TEST_P(SchedulerTest, ARequestWaitsForTheBlocksOfASamePromptInFlight) {
  auto pipeline = make();
  const std::vector<int32_t> shared = prompt(4, 40);
  std::vector<int32_t> longer = shared;
  for (int32_t t : prompt(5, 6)) longer.push_back(t);
  SchedulerStats stats;
  const auto got = run_all(
      *pipeline, {request(0, shared, 3), request(1, shared, 3), request(2, longer, 3)}, &stats);
  EXPECT_EQ(got.at("0").cached_prompt_tokens, 0);
  EXPECT_EQ(got.at("1").cached_prompt_tokens, 39) << "all but the last prompt position";
  EXPECT_EQ(got.at("2").cached_prompt_tokens, 40);
  // And what they generate is what they generate alone.
  for (int32_t i = 1; i <= 2; ++i) {
    const std::string id = std::to_string(i);
    const auto alone = run_all(*pipeline, {request(i, i == 1 ? shared : longer, 3)});
    expect_same(got.at(id), alone.at(id));
  }
}

// A short request that arrives while a long prompt is being prefilled gets
// its first token from the next step, which is kept short (the long prompt
// gets rows up to a quarter of max_step_tokens, 64 / 4, in all), and the long
// prompt then goes on at full steps.
TEST_P(SchedulerTest, AShortPromptIsNotHeldBehindALongOnesChunks) {
  auto pipeline = make();
  Scheduler scheduler(*pipeline);
  const uint64_t long_one = scheduler.submit(request(0, prompt(0, 200), 4));
  scheduler.step();  // 64 rows of the long prompt
  EXPECT_EQ(scheduler.stats().prefill_rows, 64);
  const uint64_t short_one = scheduler.submit(request(1, prompt(1, 5), 4));
  scheduler.step();
  EXPECT_EQ(scheduler.generated_tokens(short_one), 1);
  EXPECT_EQ(scheduler.generated_tokens(long_one), 0);
  EXPECT_EQ(scheduler.stats().prefill_rows, 64 + 16)
      << "5 rows of the short prompt, 11 of the long";
  scheduler.step();  // the short one's next token and 63 rows of the long prompt
  EXPECT_EQ(scheduler.stats().prefill_rows, 64 + 16 + 63);
  EXPECT_EQ(scheduler.generated_tokens(short_one), 2);
  scheduler.run();
  EXPECT_EQ(scheduler.take_finished().size(), 2u);
  EXPECT_EQ(scheduler.used_blocks(), 0);
}

// Prompt log-probabilities, over chunks of 64 rows: entry i scores prompt
// token i + 1 with the logits a request whose prompt ends at token i samples
// its first token from.
TEST_P(SchedulerTest, PromptLogprobsScoreEachPromptTokenFromThePrefixBeforeIt) {
  auto pipeline = make({"components.sampler.chain=[{top_k: 1}]"});
  const std::vector<int32_t> tokens = prompt(3, 150);
  Request scored = request(0, tokens, 2);
  scored.settings.prompt_logprobs = true;
  scored.settings.top_logprobs = 2;
  // The same prompt cached first must not be attached: its rows are needed.
  const auto first = run_all(*pipeline, {request(9, tokens, 1), scored});
  const std::vector<TokenLogprobs>& entries = first.at("0").prompt_logprobs;
  ASSERT_EQ(entries.size(), tokens.size() - 1);
  EXPECT_EQ(first.at("0").cached_prompt_tokens, 0);
  for (const size_t i : {size_t{0}, size_t{62}, size_t{63}, size_t{64}, size_t{148}}) {
    Request prefix = request(1, std::vector<int32_t>(tokens.begin(), tokens.begin() + i + 1), 1);
    const RequestResult alone = run_all(*pipeline, {prefix}).at("1");
    const TokenLogprobs expected = token_logprobs(alone.logits, tokens[i + 1], 2);
    EXPECT_EQ(entries[i].chosen.token, tokens[i + 1]) << i;
    EXPECT_EQ(entries[i].chosen.logprob, expected.chosen.logprob) << i;
    ASSERT_EQ(entries[i].top.size(), 2u) << i;
    EXPECT_EQ(entries[i].top[0].token, expected.top[0].token) << i;
    EXPECT_EQ(entries[i].top[1].logprob, expected.top[1].logprob) << i;
  }
  EXPECT_TRUE(first.at("9").prompt_logprobs.empty()) << "not asked for";
}

// min_new_tokens keeps the end-of-generation token out of a request's
// first tokens however likely it is: a +100 bias makes it the first token
// drawn without the setting.
TEST_P(SchedulerTest, MinNewTokensHoldsTheEndTokenBack) {
  auto pipeline = make({"components.sampler.chain=[{logit_bias: {}}, {top_k: 1}]"});
  const Tokenizer& tokenizer = pipeline->tokenizer();
  const std::optional<int32_t> eos = tokenizer.eos_id();
  ASSERT_TRUE(eos.has_value());
  ASSERT_TRUE(tokenizer.is_end_of_generation(*eos));
  Request eager = request(0, prompt(0, 5), 20);
  eager.settings.sampler["logit_bias"][std::to_string(*eos)] = "100";
  Request held = eager;
  held.id = "1";
  held.settings.min_new_tokens = 6;
  const auto got = run_all(*pipeline, {eager, held});
  EXPECT_EQ(got.at("0").generated_tokens, std::vector<int32_t>{*eos});
  const std::vector<int32_t>& tokens = got.at("1").generated_tokens;
  ASSERT_EQ(tokens.size(), 7u) << "six tokens, then the end token";
  for (size_t i = 0; i < 6; ++i) EXPECT_FALSE(tokenizer.is_end_of_generation(tokens[i])) << i;
  EXPECT_EQ(tokens.back(), *eos);
  EXPECT_EQ(got.at("1").finish, FinishReason::kStop);
  // The kept logits are the model's, not the masked ones.
  const size_t vocab = got.at("1").logits.size() / tokens.size();
  EXPECT_TRUE(std::isfinite(got.at("1").logits[static_cast<size_t>(*eos)]));
  EXPECT_EQ(vocab, static_cast<size_t>(pipeline->check().hparams.n_vocab));

  Scheduler scheduler(*pipeline);
  Request too_many = request(2, prompt(2, 5), 4);
  too_many.settings.min_new_tokens = 5;
  try {
    scheduler.submit(too_many);
    ADD_FAILURE() << "min_new_tokens above max_new_tokens was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInputRejected);
    EXPECT_NE(std::string(e.what()).find("min_new_tokens 5 is outside [0, 4]"), std::string::npos)
        << e.what();
  }
}

// With ignore_end_of_generation an end token is generated and counted but
// kept out of the text: a stop string equal to its piece (the pipeline's
// "<|im_end|>") does not end the request, max_new_tokens does.
TEST_P(SchedulerTest, AnIgnoredEndTokenMeetsNoStopString) {
  auto pipeline = make({"components.sampler.chain=[{logit_bias: {}}, {top_k: 1}]"});
  const Tokenizer& tokenizer = pipeline->tokenizer();
  const std::optional<int32_t> eos = tokenizer.eos_id();
  ASSERT_TRUE(eos.has_value());
  Request endless = request(0, prompt(0, 5), 5);
  endless.settings.sampler["logit_bias"][std::to_string(*eos)] = "100";
  endless.settings.ignore_end_of_generation = true;
  endless.settings.stop = std::vector<std::string>{tokenizer.piece(*eos)};
  const RequestResult got = run_all(*pipeline, {endless}).at("0");
  EXPECT_EQ(got.generated_tokens, std::vector<int32_t>(5, *eos));
  EXPECT_EQ(got.finish, FinishReason::kLength);
  EXPECT_EQ(got.text, "");
}

TEST_P(SchedulerTest, RefusesWhatItCannotRun) {
  auto pipeline = make();
  Scheduler scheduler(*pipeline);
  const auto kind_of = [&](Request r) {
    try {
      scheduler.submit(std::move(r));
    } catch (const Error& e) {
      return e.kind();
    }
    return ErrorKind::kInternal;  // not refused
  };
  EXPECT_EQ(kind_of(request(0, {}, 4)), ErrorKind::kInputRejected);
  EXPECT_EQ(kind_of(request(0, prompt(0, 256), 4)), ErrorKind::kInputRejected);
  EXPECT_EQ(kind_of(request(0, {3, 9999}, 4)), ErrorKind::kInputRejected);
  Request bad_link = request(0, prompt(0, 4), 4);
  bad_link.settings.sampler["min_p"]["value"] = "0.1";
  EXPECT_EQ(kind_of(bad_link), ErrorKind::kConfig);
  Request bad_value = request(0, prompt(0, 4), 4);
  bad_value.settings.sampler["top_k"]["value"] = "-3";
  EXPECT_EQ(kind_of(bad_value), ErrorKind::kConfig);
  Request empty_stop = request(0, prompt(0, 4), 4);
  empty_stop.settings.stop = std::vector<std::string>{""};
  EXPECT_EQ(kind_of(empty_stop), ErrorKind::kConfig);
  EXPECT_EQ(scheduler.waiting(), 0u) << "a refused request must leave nothing queued";

  // A cache of fewer blocks than max_sequences (every pipeline that builds
  // has stages it can step: check_pipeline refuses the others).
  const auto build_kind = [&](std::vector<std::string> overrides, const std::string& stages) {
    auto p = make(std::move(overrides), stages);
    try {
      Scheduler s(*p);
    } catch (const Error& e) {
      return e.kind();
    }
    return ErrorKind::kInternal;
  };
  EXPECT_EQ(build_kind({"components.kv_cache.block_tokens=0"}, "[prefill: {}, decode: {}]"),
            ErrorKind::kConfig);
  EXPECT_EQ(build_kind({}, "[prefill: {}]"), ErrorKind::kInternal);  // accepted: scoring
}

// A pipeline of the prefill stage alone scores prompts: batched requests
// that ask keep every prompt position's logits (prompt_logits), the others
// none (the prefill stage's all_logits is run_tokens' to apply); all
// generate nothing and
// end with their prompt; the rows are those a forward pass over the whole
// prompt gives by hand (Session::forward with every row's logits), bit for
// bit.
TEST_P(SchedulerTest, AScoringPipelineKeepsEveryPromptRowAndGeneratesNothing) {
  auto pipeline = make({}, "[prefill: {all_logits: true}]");
  const size_t vocab = static_cast<size_t>(pipeline->check().hparams.n_vocab);
  std::vector<Request> requests;
  for (int32_t i = 0; i < 6; ++i) {
    Request r;
    r.id = std::to_string(i);
    r.prompt = prompt(i, 5 + 13 * i);  // 5..70 positions: several steps of 64 rows
    r.settings.prompt_logits = true;
    requests.push_back(std::move(r));
  }
  requests[5].prompt = prompt(5, 256);  // a prompt may fill the cache when nothing follows it
  const auto scored = run_all(*pipeline, requests);
  ASSERT_EQ(scored.size(), requests.size());
  for (const Request& request : requests) {
    const RequestResult& r = scored.at(request.id);
    EXPECT_EQ(r.finish, FinishReason::kNone) << request.id;
    EXPECT_TRUE(r.generated_tokens.empty()) << request.id;
    ASSERT_EQ(r.prompt_logits.size(), request.prompt.size() * vocab) << request.id;
    NullSink sink;
    auto session = pipeline->new_session(request.prompt);
    session->forward(static_cast<int32_t>(request.prompt.size()), true);
    const std::span<const float> by_hand = session->logits();
    ASSERT_EQ(by_hand.size(), r.prompt_logits.size());
    EXPECT_EQ(0, std::memcmp(by_hand.data(), r.prompt_logits.data(), by_hand.size() * 4))
        << "request " << request.id << ": prompt logits differ from the whole prompt's pass";
  }
  Request unasked = requests[1];
  unasked.settings.prompt_logits = false;
  EXPECT_TRUE(run_all(*pipeline, {unasked}).at("1").prompt_logits.empty());
  // Asked for by a request of a generating pipeline, they come with its tokens.
  auto generating = make();
  Request asked = request(0, prompt(0, 30), 4);
  asked.settings.prompt_logits = true;
  const auto with = run_all(*generating, {asked});
  const auto without = run_all(*generating, {request(0, prompt(0, 30), 4)});
  EXPECT_EQ(with.at("0").prompt_logits.size(), 30 * vocab);
  EXPECT_TRUE(without.at("0").prompt_logits.empty());
  expect_same(with.at("0"), without.at("0"));
  // The last prompt row is the one the first token was drawn from.
  EXPECT_EQ(0, std::memcmp(with.at("0").prompt_logits.data() + 29 * vocab,
                           with.at("0").logits.data(), vocab * 4));
}

// A request that holds its sequence is continued by another: the second
// prefills only its own tokens (and the answer's last, uncached one) on the
// held cache, and draws what a new request of the whole conversation draws,
// logits bit for bit; release() and the continuing request's end free it.
TEST_P(SchedulerTest, AHeldSequenceIsContinuedOnItsCache) {
  auto pipeline = make();
  Scheduler scheduler(*pipeline);
  Request first = request(0, prompt(0, 21), 6);
  first.settings.ignore_end_of_generation = true;
  first.settings.hold = true;
  const RequestResult a = scheduler.run_one(first);
  ASSERT_EQ(a.generated_tokens.size(), 6u);
  EXPECT_EQ(a.cached_tokens, 26) << "every token but the last drawn one is cached";
  EXPECT_GT(scheduler.used_blocks(), 0) << "the held sequence keeps its blocks";

  Request next = request(1, prompt(1, 9), 5);
  next.settings.ignore_end_of_generation = true;
  next.continues = a.handle;
  // Others run alongside while it continues.
  scheduler.submit(request(2, prompt(2, 17), 7));
  const RequestResult b = scheduler.run_one(next);
  EXPECT_EQ(b.cached_prompt_tokens, 26);
  std::vector<int32_t> whole = a.prompt_tokens;
  whole.insert(whole.end(), a.generated_tokens.begin(), a.generated_tokens.end());
  whole.insert(whole.end(), next.prompt.begin(), next.prompt.end());
  EXPECT_EQ(b.prompt_tokens, whole);
  Request fresh = request(1, whole, 5);
  fresh.settings.ignore_end_of_generation = true;
  auto other = make();  // whose cache this scheduler's held blocks do not share
  expect_same(b, run_all(*other, {fresh}).at("1"));

  scheduler.run();
  EXPECT_EQ(scheduler.take_finished().size(), 1u) << "the other request's result waits for it";
  EXPECT_EQ(scheduler.used_blocks(), 0) << "the continuing request did not hold";
  // A handle that holds nothing is refused; release() frees a held one.
  Request orphan = request(3, prompt(3, 4), 2);
  orphan.continues = a.handle;
  EXPECT_THROW(scheduler.submit(orphan), Error);
  Request held = request(4, prompt(4, 12), 2);
  held.settings.hold = true;
  const RequestResult c = scheduler.run_one(held);
  EXPECT_GT(scheduler.used_blocks(), 0);
  scheduler.release(c.handle);
  EXPECT_EQ(scheduler.used_blocks(), 0);

  // Held sequences that leave a request no room, with nothing running that
  // could free any, are named (kInputRejected), and the request is gone.
  auto small = make({"components.kv_cache.capacity_tokens=16", "batching.max_sequences=2"});
  Scheduler tight(*small);
  Request holder = request(5, prompt(5, 10), 3);
  holder.settings.ignore_end_of_generation = true;
  holder.settings.hold = true;
  const RequestResult h = tight.run_one(holder);
  EXPECT_EQ(tight.used_blocks(), 3);
  Request later = request(6, prompt(6, 8), 2);
  later.settings.ignore_end_of_generation = true;
  try {
    tight.run_one(later);
    ADD_FAILURE() << "a request ran without room";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInputRejected);
    EXPECT_NE(std::string(e.what()).find("hold their sequences for a next turn"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(tight.waiting(), 0u);
  tight.release(h.handle);
  EXPECT_EQ(tight.run_one(later).generated_tokens.size(), 2u);
  EXPECT_EQ(tight.used_blocks(), 0);

  // Two held sequences fill the cache and both are continued: each waits
  // for a block the other holds, with nothing running. One gives its blocks
  // up and computes its history again (a preemption), so both finish.
  std::vector<uint64_t> handles;
  for (int32_t i = 0; i < 2; ++i) {
    Request turn = request(7 + i, prompt(7 + i, 5), 3);
    turn.settings.ignore_end_of_generation = true;
    turn.settings.hold = true;
    handles.push_back(tight.run_one(turn).handle);
  }
  EXPECT_EQ(tight.used_blocks(), 4) << "7 cached positions each: 2 blocks of 4";
  for (int32_t i = 0; i < 2; ++i) {
    Request next_turn = request(9 + i, prompt(9 + i, 2), 2);
    next_turn.settings.ignore_end_of_generation = true;
    next_turn.continues = handles[static_cast<size_t>(i)];
    tight.submit(next_turn);
  }
  tight.run();
  const std::vector<RequestResult> both = tight.take_finished();
  ASSERT_EQ(both.size(), 2u);
  int32_t preempted = 0;
  for (const RequestResult& r : both) {
    EXPECT_EQ(r.generated_tokens.size(), 2u) << r.id;
    EXPECT_EQ(r.prompt_tokens.size(), 10u) << r.id;
    preempted += r.preemptions;
  }
  EXPECT_GE(preempted, 1);
  EXPECT_EQ(tight.used_blocks(), 0);
}

TEST_P(SchedulerTest, CancelFreesBlocksAtOnce) {
  auto pipeline = make();
  Scheduler scheduler(*pipeline);
  const uint64_t a = scheduler.submit(request(0, prompt(0, 30), 50));
  const uint64_t b = scheduler.submit(request(1, prompt(1, 30), 50));
  scheduler.step();
  scheduler.step();
  const int64_t before = scheduler.used_blocks();
  scheduler.cancel(a);
  EXPECT_LT(scheduler.used_blocks(), before);
  scheduler.cancel(b);
  EXPECT_EQ(scheduler.used_blocks(), 0);
  EXPECT_FALSE(scheduler.step());
  const auto results = scheduler.take_finished();
  ASSERT_EQ(results.size(), 2u);
  for (const RequestResult& r : results) EXPECT_EQ(r.finish, FinishReason::kCancelled);
}

// generated_tokens counts a request's tokens while it waits or runs, one
// more per decode step, and forgets it once it finished.
TEST_P(SchedulerTest, GeneratedTokensCountsUntilTheRequestEnds) {
  auto pipeline = make();
  Scheduler scheduler(*pipeline);
  Request r = request(0, prompt(0, 10), 3);
  r.settings.ignore_end_of_generation = true;
  const uint64_t a = scheduler.submit(std::move(r));
  EXPECT_EQ(scheduler.generated_tokens(a), 0);
  EXPECT_EQ(scheduler.generated_tokens(a + 1), std::nullopt);
  scheduler.step();  // the whole prompt and its first token
  EXPECT_EQ(scheduler.generated_tokens(a), 1);
  scheduler.step();
  EXPECT_EQ(scheduler.generated_tokens(a), 2);
  scheduler.run();
  EXPECT_EQ(scheduler.generated_tokens(a), std::nullopt);
  const auto results = scheduler.take_finished();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].generated_tokens.size(), 3u);
}

// Log-probabilities of the model's distribution, checked against a plain
// log-softmax of the logits each token was drawn from; streamed entries
// (Scheduler::logprobs) are the result's, and a request without
// top_logprobs gets none.
TEST_P(SchedulerTest, LogprobsAreTheLogSoftmaxOfTheDrawnLogits) {
  auto pipeline = make();
  Scheduler scheduler(*pipeline);
  Request with = request(0, prompt(0, 9), 6);
  with.settings.ignore_end_of_generation = true;
  with.settings.top_logprobs = 5;
  const uint64_t a = scheduler.submit(std::move(with));
  const uint64_t b = scheduler.submit(request(1, prompt(1, 7), 6));
  std::vector<TokenLogprobs> streamed;
  while (scheduler.step()) {
    const std::span<const TokenLogprobs> now = scheduler.logprobs(a);
    if (!scheduler.generated_tokens(a)) {  // finished: its entries are in its result
      EXPECT_TRUE(now.empty());
      continue;
    }
    ASSERT_EQ(now.size(), static_cast<size_t>(*scheduler.generated_tokens(a)));
    ASSERT_GE(now.size(), streamed.size());
    streamed.insert(streamed.end(), now.begin() + static_cast<ptrdiff_t>(streamed.size()),
                    now.end());
    EXPECT_TRUE(scheduler.logprobs(b).empty());
  }
  std::map<std::string, RequestResult> results;
  for (RequestResult& r : scheduler.take_finished()) results[r.id] = std::move(r);
  const RequestResult& r = results.at("0");
  EXPECT_TRUE(results.at("1").logprobs.empty());
  ASSERT_EQ(r.logprobs.size(), r.generated_tokens.size());
  const auto vocab = static_cast<int32_t>(r.logits.size() / r.generated_tokens.size());
  ASSERT_EQ(streamed.size(), r.generated_tokens.size() - 1);  // the last one ends it
  for (size_t i = 0; i < r.logprobs.size(); ++i) {
    const float* row = r.logits.data() + i * static_cast<size_t>(vocab);
    double norm = 0.0;
    for (int32_t t = 0; t < vocab; ++t) norm += std::exp(static_cast<double>(row[t]));
    const auto expected = [&](int32_t t) { return std::log(std::exp(double{row[t]}) / norm); };
    const TokenLogprobs& e = r.logprobs[i];
    EXPECT_EQ(e.chosen.token, r.generated_tokens[i]);
    EXPECT_NEAR(e.chosen.logprob, expected(e.chosen.token), 1e-4) << "token " << i;
    std::vector<int32_t> order(static_cast<size_t>(vocab));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t x, int32_t y) { return row[x] > row[y]; });
    ASSERT_EQ(e.top.size(), 5u);
    for (size_t k = 0; k < 5; ++k) {
      EXPECT_EQ(e.top[k].token, order[k]) << "token " << i << " rank " << k;
      EXPECT_NEAR(e.top[k].logprob, expected(order[k]), 1e-4);
    }
    if (i < streamed.size()) {
      EXPECT_EQ(streamed[i].chosen.token, e.chosen.token);
      EXPECT_EQ(streamed[i].chosen.logprob, e.chosen.logprob);
    }
  }
}

TEST_P(SchedulerTest, RefusesTopLogprobsOutsideItsRange) {
  auto pipeline = make();
  Scheduler scheduler(*pipeline);
  for (int32_t bad : {-1, kMaxTopLogprobs + 1}) {
    Request r = request(0, prompt(0, 4), 2);
    r.settings.top_logprobs = bad;
    try {
      scheduler.submit(std::move(r));
      ADD_FAILURE() << "top_logprobs " << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInputRejected);
      EXPECT_NE(std::string(e.what()).find("top_logprobs " + std::to_string(bad)),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_EQ(scheduler.waiting(), 0u);
}

// Under AddressSanitizer RSS is not the test's memory: freed blocks wait in
// its quarantine (256 MiB by default) before they are reused, so RSS climbs
// over any long run; LeakSanitizer checks for leaks at exit instead.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kRssMeasuresMemory = false;
#else
constexpr bool kRssMeasuresMemory = true;
#endif

long rss_kb() {
  malloc_trim(0);
  std::ifstream in("/proc/self/status");
  for (std::string key; in >> key;) {
    if (key == "VmRSS:") {
      long kb = 0;
      in >> kb;
      return kb;
    }
  }
  return -1;
}

// 1,000 requests of random lengths with shared prefixes, a fifth cancelled
// at a random step: every request ends, every block is free again, and RSS
// after the last 800 is that after the first 200.
TEST_P(SchedulerTest, SoakLeavesEveryBlockFreeAndMemoryFlat) {
  auto pipeline = make({"components.kv_cache.capacity_tokens=128", "batching.max_sequences=12"});
  Scheduler scheduler(*pipeline);
  std::mt19937 rng(5);
  const std::vector<int32_t> shared = prompt(9, 24);
  std::vector<uint64_t> live;
  size_t ended = 0;
  long baseline = 0;
  for (int32_t i = 0; i < 1000; ++i) {
    std::vector<int32_t> p;
    if (rng() % 2 == 0) p.assign(shared.begin(), shared.begin() + 1 + rng() % shared.size());
    for (int32_t t : prompt(i, 1 + static_cast<int32_t>(rng() % 30))) p.push_back(t);
    Request r = request(i, p, 1 + static_cast<int32_t>(rng() % 24));
    r.settings.keep_logits = false;
    live.push_back(scheduler.submit(std::move(r)));
    if (rng() % 5 == 0) scheduler.cancel(live[rng() % live.size()]);
    if (i % 4 == 3) {
      for (int s = 0; s < 6; ++s) scheduler.step();
    }
    ended += scheduler.take_finished().size();
    if (i == 199) {
      scheduler.run();
      ended += scheduler.take_finished().size();
      baseline = rss_kb();
    }
  }
  scheduler.run();
  ended += scheduler.take_finished().size();
  EXPECT_EQ(ended, 1000u);
  EXPECT_EQ(scheduler.used_blocks(), 0);
  EXPECT_EQ(scheduler.running() + scheduler.waiting(), 0u);
  EXPECT_GT(scheduler.stats().prefix_hit_tokens, 0);
  if (kRssMeasuresMemory) {
    EXPECT_LT(rss_kb() - baseline, 2048) << "RSS grew by more than 2 MiB over 800 requests";
  } else {
    std::printf("RSS not compared: AddressSanitizer's quarantine holds freed memory\n");
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, SchedulerTest, ::testing::ValuesIn(kBackends),
                         [](const ::testing::TestParamInfo<SchedulerBackend>& p) {
                           return std::string(p.param.name);
                         });

}  // namespace
}  // namespace duet
