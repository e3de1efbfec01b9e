// Attention and KV-cache storage registered by a plugin for a backend
// (tests/plugins, VARIANT_extensions) run in a pipeline exactly as the
// backend's own, and every mismatch is reported before anything runs.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "duet/app/pipeline.h"
#include "duet/app/pipeline_check.h"
#include "duet/app/scheduler.h"
#include "duet/error.h"
#include "tiny_model.h"

namespace duet {
namespace {

namespace fs = std::filesystem;

class Extensions : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(testing::make_temp_dir("extensions"));
    // head_dim 32, so that a q8_0 cache (blocks of 32) can hold a head.
    testing::TinyLlama shape;
    shape.n_embd = 128;
    testing::write_tiny_llama(*dir_ / "tiny.gguf", shape);
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }

  PipelineConfig config(std::vector<std::string> overrides) {
    const std::string yaml = "model: {path: tiny.gguf}\nplugins: {paths: [\"" +
                             std::string(DUET_TEST_PLUGIN_DIR) + R"("]}
backend: {plugin: reference}
components:
  kv_cache: {capacity_tokens: 64}
  sampler: {seed: 7, chain: [greedy]}
stages:
  - prefill: {}
  - decode: {max_new_tokens: 8}
)";
    PipelineConfig c = parse_pipeline_config(yaml, "test.yaml", *dir_, overrides);
    load_pipeline_plugins(c, host_);
    return c;
  }

  // Every logit of a prompt and 6 greedy steps.
  std::vector<float> logits(std::vector<std::string> overrides) {
    auto pipeline = Pipeline::build(config(std::move(overrides)), host_);
    const std::vector<int32_t> prompt = {1, 40, 41, 42, 77, 78, 200, 201, 5};
    auto session = pipeline->new_session(prompt);
    session->forward(static_cast<int32_t>(prompt.size()), true);
    std::vector<float> all(session->logits().begin(), session->logits().end());
    for (int i = 0; i < 6; ++i) {
      session->append(session->sample());
      session->forward(1, false);
      all.insert(all.end(), session->logits().begin(), session->logits().end());
    }
    return all;
  }

  // The message of the error check_pipeline throws, and its kind.
  std::pair<ErrorKind, std::string> refusal(std::vector<std::string> overrides) {
    try {
      check_pipeline(config(std::move(overrides)), host_);
    } catch (const Error& e) {
      return {e.kind(), e.what()};
    }
    ADD_FAILURE() << "the pipeline was accepted";
    return {ErrorKind::kInternal, ""};
  }

  static inline fs::path* dir_ = nullptr;
  PluginHost host_;
  NullSink sink_;
};

TEST_F(Extensions, ARegisteredAttentionRunsInAPipelineLikeTheBackendsOwn) {
  const std::vector<float> own = logits({});
  EXPECT_EQ(check_pipeline(config({"components.attention.impl=test_full"}), host_).attention_impl,
            "test_full");
  // test_full hands every call to the backend's 'full': the same bits.
  EXPECT_EQ(logits({"components.attention.impl=test_full"}), own);
}

TEST_F(Extensions, ARegisteredStorageGivesTheBuiltInCachesLogitsInEveryDtype) {
  for (const char* dtype : {"f32", "f16", "q8_0"}) {
    SCOPED_TRACE(dtype);
    const std::string d = std::string("components.kv_cache.dtype=") + dtype;
    EXPECT_EQ(logits({d, "components.kv_cache.impl=test_rows"}), logits({d}));
  }
}

TEST_F(Extensions, AnAttentionThatCannotReadTheCachesDtypeIsRefusedBeforeAnythingRuns) {
  const auto [kind, message] =
      refusal({"components.attention.impl=test_f32_only", "components.kv_cache.dtype=q8_0"});
  EXPECT_EQ(kind, ErrorKind::kConfig);
  EXPECT_NE(message.find("attention 'test_f32_only' cannot use this KV cache: test_f32_only reads "
                         "f32 caches only"),
            std::string::npos)
      << message;
}

TEST_F(Extensions, OptionsReachThePluginsFactoryAndTheBackendsOwnTakeNone) {
  auto [kind, message] = refusal({"components.attention.options.window=4"});
  EXPECT_EQ(kind, ErrorKind::kConfig);
  EXPECT_NE(message.find("components.attention.options: attention 'full' of backend 'reference' "
                         "takes no options, but 'window' was given"),
            std::string::npos)
      << message;
  std::tie(kind, message) =
      refusal({"components.kv_cache.impl=test_rows", "components.kv_cache.options.path=/tmp/x"});
  EXPECT_EQ(kind, ErrorKind::kConfig);
  EXPECT_NE(message.find("components.kv_cache.options"), std::string::npos) << message;
  EXPECT_NE(message.find("path"), std::string::npos) << message;
}

TEST_F(Extensions, AnUnknownNameListsTheBackendsOwnAndThePluginsTogether) {
  const auto [kind, message] = refusal({"components.kv_cache.impl=test_rowz"});
  EXPECT_EQ(kind, ErrorKind::kConfig);
  EXPECT_NE(message.find("components.kv_cache.impl 'test_rowz' is not provided by backend "
                         "'reference' or a plugin for it; did you mean 'test_rows'?; available: "
                         "'contiguous', 'mmap_file', 'test_range_off_by_one', 'test_rows', "
                         "'test_throw_write'"),
            std::string::npos)
      << message;
}

// A plugin's factory takes single values (duet/plugin.h's StageFactory): a
// list for one of its options is an error, not an option dropped unseen.
TEST_F(Extensions, AListOptionForAPluginStageIsRefusedNotDropped) {
  const auto [kind, message] = refusal({"stages=[{prefill: {}}, {lookup_decode: {stop: [a, b]}}]"});
  EXPECT_EQ(kind, ErrorKind::kConfig);
  EXPECT_NE(message.find("stages[1].lookup_decode.stop: stage 'lookup_decode' comes from a plugin, "
                         "whose options are single values, not lists; give one value"),
            std::string::npos)
      << message;
}

// onednn keeps q8_0 (VNNI path) and f16 (AVX-512 paths) caches in tiles of
// its own, which an attention from a plugin (reading slot rows) cannot
// read: paired with one, the cache is made in slot rows
// (Backend::create_kv_cache_rows, ABI 1.9) and the run works, with the
// logits of the backend's own attention over its own layout.
TEST_F(Extensions, APluginAttentionIsGivenSlotRowsOfACacheTheBackendWouldTile) {
  if (!fs::exists(fs::path(DUET_BUILD_DIR) / "plugins/duet-onednn.so"))
    GTEST_SKIP() << "the onednn backend is not built";
  for (const char* dtype : {"q8_0", "f16"}) {
    SCOPED_TRACE(dtype);
    const std::string d = std::string("components.kv_cache.dtype=") + dtype;
    const PipelineCheck checked = check_pipeline(
        config({"backend.plugin=onednn", "components.attention.impl=test_full", d}), host_);
    auto backend =
        host_.create_backend("onednn", Options("backend.options"));  // loaded by config()
    EXPECT_EQ(backend->create_kv_cache_rows(checked.kv_cache)->layer(0).tile_slots, 0);
    // test_full is the backend's attention, here over rows: the logits of
    // its own over its own layout, up to the order of additions (q8_0 tiles:
    // integer arithmetic, ~1e-8).
    const std::vector<float> got =
        logits({"backend.plugin=onednn", "components.attention.impl=test_full", d});
    const std::vector<float> want = logits({"backend.plugin=onednn", d});
    ASSERT_EQ(got.size(), want.size());
    double err = 0.0, ref = 0.0;
    for (size_t i = 0; i < got.size(); ++i) {
      err += (double{got[i]} - want[i]) * (double{got[i]} - want[i]);
      ref += double{want[i]} * want[i];
    }
    EXPECT_LE(err / ref, 1e-6);
  }
}

// A stage of a plugin built before ABI 1.3 runs under a session as it
// always did, and the batching scheduler refuses it, naming the version it
// needs, without touching the stage's ABI 1.3 slot (which aborts).
// A stage of the old interface (Stage::run, ABI 1.0) is refused when the
// pipeline is checked, naming the version it needs: the scheduler is the
// only engine, and it steps stages through the interface of 1.7. The test
// plugin's stage functions abort, proving the host never calls them.
TEST_F(Extensions, AStageOfTheOldInterfaceIsRefusedNamingTheVersionItNeeds) {
  try {
    Pipeline::build(config({"stages.1={test_abi_1_0_decode: {}}"}), host_);
    ADD_FAILURE() << "a pipeline accepted a stage built against ABI 1.0";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kPlugin);
    const std::string message = e.what();
    for (const char* part : {"stage 'test_abi_1_0_decode' (plugin 'test-abi-1-0')",
                             "built against Duet ABI 1.0", "stages need ABI 1.7 or later",
                             "duet/stage.h", "rebuild the plugin against this Duet SDK"}) {
      EXPECT_NE(message.find(part), std::string::npos) << message;
    }
  }
}

// A decode stage's drafter that throws ends its own request, named, while
// the others in the same steps run on and give the plain decode loop's
// tokens (its test stage proposes nothing otherwise); alone, `duet run`'s
// path rethrows the error.
TEST_F(Extensions, ADrafterThatThrowsEndsItsOwnRequestAlone) {
  auto failing =
      Pipeline::build(config({"stages.1={test_throw_stage: {first_token: 7}}",
                              "components.kv_cache.block_tokens=4", "batching.max_sequences=4"}),
                      host_);
  auto plain = Pipeline::build(config({}), host_);
  Scheduler scheduler(*failing);
  for (int32_t first : {5, 7, 9}) {
    Request r;
    r.id = std::to_string(first);
    r.prompt = {first, 40, 41, 42};
    scheduler.submit(std::move(r));
  }
  scheduler.run();
  const std::vector<RequestResult> results = scheduler.take_finished();
  ASSERT_EQ(results.size(), 3u);
  for (const RequestResult& r : results) {
    if (r.id == "7") {
      EXPECT_EQ(r.finish, FinishReason::kFailed);
      EXPECT_EQ(r.error_kind, ErrorKind::kPlugin);
      EXPECT_EQ(r.error,
                "stage 'test_throw_stage' (plugin 'test-good', stages[1]) failed: the stage broke");
      continue;
    }
    const RunResult alone = plain->run_tokens(r.prompt_tokens, sink_);
    EXPECT_EQ(r.generated_tokens, alone.generated_tokens) << r.id;
  }
  EXPECT_EQ(scheduler.used_blocks(), 0);
  try {
    failing->run_tokens(std::vector<int32_t>{7, 40, 41, 42}, sink_);
    ADD_FAILURE() << "the drafter's failure was not reported";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kPlugin);
  }
  EXPECT_EQ(failing->run_tokens(std::vector<int32_t>{5, 40, 41, 42}, sink_).generated_tokens,
            plain->run_tokens(std::vector<int32_t>{5, 40, 41, 42}, sink_).generated_tokens);
}

// Whatever a plugin's attention throws comes back naming it, its plugin
// and its YAML key; the process goes on.
TEST_F(Extensions, WhatAnAttentionThrowsIsReportedNamingIt) {
  auto pipeline = Pipeline::build(config({"components.attention.impl=test_throw_int"}), host_);
  try {
    pipeline->run_tokens(std::vector<int32_t>{1, 40, 41, 42}, sink_);
    ADD_FAILURE() << "the attention's throw was not reported";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kPlugin);
    EXPECT_EQ(std::string(e.what()),
              "attention 'test_throw_int' (plugin 'test-extensions', "
              "components.attention.impl) failed: it threw something that is not a "
              "std::exception");
  }
}

// An attention that leaves a row other than KVCache::write stores it runs
// without a word (its own step's output is right), and debug.check_plugins
// stops it at the first such row, naming it.
TEST_F(Extensions, CheckedModeCatchesAnAttentionThatLeavesARowUnwritten) {
  const std::vector<int32_t> prompt = {1, 40, 41, 42};
  auto unchecked = Pipeline::build(config({"components.attention.impl=test_forgets_row"}), host_);
  EXPECT_EQ(unchecked->run_tokens(prompt, sink_).generated_tokens.size(), 8u);
  auto checked = Pipeline::build(
      config({"components.attention.impl=test_forgets_row", "debug.check_plugins=true"}), host_);
  try {
    checked->run_tokens(prompt, sink_);
    ADD_FAILURE() << "the unwritten row was not caught";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kPlugin);
    EXPECT_EQ(std::string(e.what()),
              "attention 'test_forgets_row' (plugin 'test-extensions', components.attention.impl) "
              "left the K row of position 3 (slot 3, layer 0) other than KVCache::write stores "
              "it: an attention stores every row it is given (duet/attention.h); found by "
              "debug.check_plugins");
  }
  // A correct plugin attention passes the same check.
  auto good = Pipeline::build(
      config({"components.attention.impl=test_full", "debug.check_plugins=true"}), host_);
  EXPECT_EQ(good->run_tokens(prompt, sink_).generated_tokens.size(), 8u);
}

}  // namespace
}  // namespace duet
