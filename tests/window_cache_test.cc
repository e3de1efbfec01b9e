// Sliding-window layers in rings (components.kv_cache.window_layers: ring)
// against the same layers in the full cache, on a tiny random Gemma 3 whose
// window is 8 positions (rings of 16 slots, so at most 9 rows a sequence a
// step): batched and preempted requests, rolled-back drafts and hand-driven
// sessions give the same tokens and the same logits bit for bit
// (reference, and onednn and cuda in their batch-invariant modes, whose
// results do not depend on how a prompt is cut into passes; cuda's cases
// skip, saying why, without a GPU); and which pipelines get rings,
// what they take, and what is refused.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "duet/app/pipeline.h"
#include "duet/app/scheduler.h"
#include "duet/error.h"
#include "duet/session.h"
#include "scheduler_runs.h"
#include "tiny_model.h"

namespace duet {
namespace {

namespace fs = std::filesystem;

constexpr int32_t kWindow = 8;

class WindowCache : public ::testing::TestWithParam<const char*> {
 public:
  static void SetUpTestSuite() {
    dir_ = new fs::path(testing::make_temp_dir("window_cache"));
    testing::TinyLlama shape;
    shape.architecture = "gemma3";
    shape.head_dim = 32;
    shape.n_layers = 6;  // five local layers, then a global one
    shape.sliding_window = kWindow;
    testing::write_tiny_llama(*dir_ / "gemma3.gguf", shape);
    testing::write_tiny_llama(*dir_ / "llama.gguf");
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }

 protected:
  // Skips, saying why, where the case's backend plugin is not built or
  // refuses to load here (cuda without a usable GPU).
  void SetUp() override {
    const std::string param = GetParam();
    std::string backend = "reference";
    for (const char* name : {"onednn", "cuda"})
      if (param.find(name) != std::string::npos) backend = name;
    if (const std::string why = testing::backend_unavailable(host_, *dir_, backend); !why.empty())
      GTEST_SKIP() << why;
  }

  std::unique_ptr<Pipeline> make(const std::string& window_layers,
                                 std::vector<std::string> overrides = {},
                                 const std::string& decode = "decode: {}",
                                 const std::string& model = "gemma3.gguf") {
    const std::string yaml = "model: {path: " + model + "}\nbackend: " + GetParam() + R"(
components:
  kv_cache: {capacity_tokens: 256, block_tokens: 4, window_layers: )" +
                             window_layers + R"(}
  sampler: {seed: 7, chain: [{top_k: 40}, {temperature: 0.9}]}
batching: {max_sequences: 16, max_step_tokens: 64}
stages: [prefill: {}, )" + decode +
                             "]\n";
    PipelineConfig c = parse_pipeline_config(yaml, "test.yaml", *dir_, overrides);
    load_pipeline_plugins(c, host_);
    return Pipeline::build(c, host_);
  }

  static std::vector<int32_t> prompt(int32_t i, int32_t length) {
    std::vector<int32_t> ids;
    for (int32_t p = 0; p < length; ++p) ids.push_back(3 + (i * 53 + p * 29) % 250);
    return ids;
  }

  // 16 requests, prompts of 1 to 46 tokens and 4 to 24 new ones: most pass
  // the 16-slot ring several times.
  static std::vector<Request> requests() {
    std::vector<Request> out;
    for (int32_t i = 0; i < 16; ++i) {
      Request r;
      r.id = std::to_string(i);
      r.prompt = prompt(i, 1 + (i * 13) % 46);
      r.settings.seed = 100 + static_cast<uint64_t>(i);
      r.settings.max_new_tokens = 4 + (i * 5) % 21;
      r.settings.keep_logits = true;
      r.settings.ignore_end_of_generation = true;
      out.push_back(std::move(r));
    }
    return out;
  }

  static void expect_same(const std::map<std::string, RequestResult>& got,
                          const std::map<std::string, RequestResult>& expected) {
    ASSERT_EQ(got.size(), expected.size());
    for (const auto& [id, r] : got) testing::expect_same_result(r, expected.at(id));
  }

  static inline fs::path* dir_ = nullptr;
  PluginHost host_;
};

TEST_P(WindowCache, BatchedRequestsGiveTheFullCachesTokensAndLogits) {
  auto full = make("full");
  auto ring = make("ring");
  ASSERT_EQ(full->check().window_cache.n_layers, 0);
  ASSERT_EQ(ring->check().window_cache.n_layers, 5);
  ASSERT_EQ(ring->check().window_ring_tokens, 16);
  SchedulerStats stats;
  const auto expected = testing::run_all(*full, requests());
  expect_same(testing::run_all(*ring, requests(), &stats), expected);
  EXPECT_GT(stats.peak_running, 4) << "the requests should have run side by side";
}

// A pool of two rings for a scheduler of eight sequences, with the full
// cache roomy: sequences wait (or are preempted) for ring blocks, so fewer
// run at once than on the full cache, and each still ends as it would
// there.
TEST_P(WindowCache, RequestsWaitingForRingBlocksStillGiveTheSameTokens) {
  auto full = make("full");
  auto ring = make("ring", {"batching.max_sequences=2"});
  ASSERT_EQ(ring->check().window_cache.capacity_tokens, 32);  // two rings of 16 slots
  BatchingConfig eight;
  eight.max_sequences = 8;
  eight.max_step_tokens = 64;
  std::vector<Request> short_ones;
  for (int32_t i = 0; i < 8; ++i) {
    Request r;
    r.id = std::to_string(i);
    r.prompt = prompt(i, 6 + i % 7);  // with 8 new tokens, at most 5 of the 64 full blocks
    r.settings.seed = 100 + static_cast<uint64_t>(i);
    r.settings.max_new_tokens = 8;
    r.settings.keep_logits = true;
    r.settings.ignore_end_of_generation = true;
    short_ones.push_back(std::move(r));
  }
  SchedulerStats full_stats, ring_stats;
  const auto expected = testing::run_all(*full, short_ones, &full_stats, &eight);
  expect_same(testing::run_all(*ring, short_ones, &ring_stats, &eight), expected);
  EXPECT_EQ(full_stats.peak_running, 8);
  EXPECT_LT(ring_stats.peak_running, full_stats.peak_running)
      << "the ring pool was meant to hold sequences back";
}

// Requests with one prompt share no prefix in rings (a ring keeps only its
// own sequence's last positions): each computes it, none is held back for
// another's blocks, and each gets what the full cache with prefix sharing
// gives it.
TEST_P(WindowCache, IdenticalPromptsShareNoPrefixInRingsAndGiveTheSameTokens) {
  auto full = make("full");
  auto ring = make("ring");
  std::vector<Request> same = requests();
  for (Request& r : same) r.prompt = prompt(5, 40);
  SchedulerStats full_stats, ring_stats;
  const auto expected = testing::run_all(*full, same, &full_stats);
  expect_same(testing::run_all(*ring, same, &ring_stats), expected);
  EXPECT_GT(full_stats.prefix_hit_tokens, 0);
  EXPECT_EQ(ring_stats.prefix_hit_tokens, 0);
}

// Rejected drafts are rolled back inside the ring: lookup_decode with rings
// gives the plain decode loop's tokens on the full cache. (The stage may
// propose 12 draft tokens and the scheduler cuts them to the 8 a ring of 16
// slots takes beside the sequence's row, but the random model's drafts are
// seldom kept, so they seldom grow that long: this test does not show the
// cut; without it such a step would stop with an internal error, never
// read a wrong slot.)
TEST_P(WindowCache, DraftsRolledBackInsideTheRingGiveThePlainDecodeTokens) {
  const std::vector<std::string> set = {"components.sampler.chain=[greedy]",
                                        "batching.draft_rows=65536"};
  auto plain = make("full", set, "decode: {max_new_tokens: 40}");
  auto spec =
      make("ring", set, "lookup_decode: {max_new_tokens: 40, ngram_min: 1, draft_tokens: 12}");
  std::vector<Request> all;
  for (int32_t i = 0; i < 6; ++i) {
    Request r;
    r.id = std::to_string(i);
    for (int32_t p = 0; p < 24; ++p) r.prompt.push_back(3 + (i * 31 + (p % 9) * 37) % 300);
    r.settings.keep_logits = true;
    all.push_back(std::move(r));
  }
  SchedulerStats stats;
  const auto expected = testing::run_all(*plain, all);
  const auto got = testing::run_all(*spec, all, &stats);
  ASSERT_EQ(got.size(), expected.size());
  for (const auto& [id, r] : got)
    EXPECT_EQ(r.generated_tokens, expected.at(id).generated_tokens) << "request " << id;
  EXPECT_GT(stats.draft_tokens, stats.accepted_draft_tokens) << "some drafts should be rejected";
}

// A session's forward of more rows than a ring takes in one pass runs in
// passes of 9, with every row's logits those of the full cache's one pass.
TEST_P(WindowCache, ASessionsLongForwardRunsInPassesWithTheSameLogits) {
  auto full = make("full");
  auto ring = make("ring");
  const std::vector<int32_t> ids = prompt(3, 40);
  auto a = full->new_session(ids);
  auto b = ring->new_session(ids);
  a->forward(30, true);
  b->forward(30, true);
  ASSERT_EQ(a->logits().size(), b->logits().size());
  EXPECT_EQ(
      0, std::memcmp(a->logits().data(), b->logits().data(), a->logits().size() * sizeof(float)));
  a->forward(10, false);
  b->forward(10, false);
  ASSERT_EQ(b->logits().size(), static_cast<size_t>(b->n_vocab()));
  EXPECT_EQ(
      0, std::memcmp(a->logits().data(), b->logits().data(), a->logits().size() * sizeof(float)));
}

TEST_P(WindowCache, AutoTakesRingsWhereTheyTakeLessMemory) {
  // f32, 2 KV heads of 32: 512 bytes a slot for K and as many for V.
  constexpr uint64_t kSlot = 2 * 2 * 32 * 4;
  // 2 sequences: rings of 16 slots take 32 of the 256 slots in 5 layers.
  auto ring = make("auto", {"batching.max_sequences=2"});
  EXPECT_EQ(ring->check().window_cache.n_layers, 5);
  EXPECT_EQ(ring->check().kv_cache_bytes, (1 * 256 + 5 * 32) * kSlot);
  EXPECT_LE(ring->kv_cache_bytes(), ring->check().kv_cache_bytes + 5 * 4096);
  // 16 sequences' rings would take all 256: the full cache, prefixes shared.
  auto full = make("auto");
  EXPECT_EQ(full->check().window_cache.n_layers, 0);
  EXPECT_EQ(full->check().kv_cache_bytes, 6 * 256 * kSlot);
  // A model without windows: nothing to put in rings.
  EXPECT_EQ(make("auto", {}, "decode: {}", "llama.gguf")->check().window_cache.n_layers, 0);
}

TEST_P(WindowCache, RingsWhereTheyCannotBeUsedAreRefusedByName) {
  const auto refusal = [&](const std::string& window_layers, const std::string& model,
                           std::vector<std::string> set = {}) {
    try {
      make(window_layers, std::move(set), "decode: {}", model);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kConfig);
      return std::string(e.what());
    }
    return std::string("(built)");
  };
  EXPECT_NE(refusal("ring", "llama.gguf")
                .find("components.kv_cache.window_layers: ring, but llama "
                      "has no sliding-window layers; use auto or full"),
            std::string::npos)
      << refusal("ring", "llama.gguf");
  const std::string storage =
      refusal("ring", "gemma3.gguf", {"components.kv_cache.impl=mmap_file"});
  EXPECT_NE(storage.find("components.kv_cache.window_layers: ring cannot be used: storage "
                         "'mmap_file' would be made twice with the same "
                         "components.kv_cache.options (rings need the backends' own "
                         "'contiguous'); use auto or full"),
            std::string::npos)
      << storage;
  EXPECT_NE(refusal("rings", "gemma3.gguf")
                .find("components.kv_cache.window_layers: expected one of 'auto', 'ring', 'full', "
                      "found 'rings'; did you mean 'ring'?"),
            std::string::npos)
      << refusal("rings", "gemma3.gguf");
}

// Each case's name: its backend.
std::string case_name(const ::testing::TestParamInfo<const char*>& p) {
  const std::string param = p.param;
  if (param.find("onednn") != std::string::npos) return "onednn_invariant";
  if (param.find("cuda") != std::string::npos) return "cuda_invariant";
  return "reference";
}

INSTANTIATE_TEST_SUITE_P(Backends, WindowCache,
                         ::testing::Values("{plugin: reference}",
                                           "{plugin: onednn, options: {threads: 2, "
                                           "batch_invariant: true}}",
                                           "{plugin: cuda, options: {batch_invariant: true}}"),
                         case_name);

}  // namespace
}  // namespace duet
