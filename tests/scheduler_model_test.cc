// The batching scheduler on the real model, SmolLM2-135M-Instruct Q4_1, with
// the onednn backend: 32 requests of different lengths batched give, in
// batch-invariant mode, exactly the tokens and logits each gives alone; in
// the default (fastest) mode, the share of greedy tokens that agree with solo
// runs is measured against the floor docs/batching.md states.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "duet/app/pipeline.h"
#include "duet/app/scheduler.h"

namespace duet {
namespace {

namespace fs = std::filesystem;

class SchedulerModel : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(fs::path(DUET_SOURCE_DIR) / "models/SmolLM2-135M-Instruct.Q4_1.gguf")) {
      FAIL() << "models/SmolLM2-135M-Instruct.Q4_1.gguf is missing; run "
                "`bash scripts/fetch-model.sh`";
    }
  }

  std::unique_ptr<Pipeline> make(bool batch_invariant) {
    PipelineConfig config = load_pipeline_config(
        fs::path(DUET_SOURCE_DIR) / "configs/smollm2-onednn.yaml",
        {"backend.options.threads=2",
         std::string("backend.options.batch_invariant=") + (batch_invariant ? "true" : "false"),
         "components.kv_cache.capacity_tokens=4096", "components.kv_cache.block_tokens=16",
         "batching.max_sequences=32", "batching.max_step_tokens=256", "stages.1.decode.stop=[]",
         "stages.1.decode.max_new_tokens=12"});
    load_pipeline_plugins(config, host_);
    return Pipeline::build(config, host_);
  }

  // 32 chat prompts of 20 to ~140 tokens.
  static std::vector<Request> requests(const Pipeline& pipeline) {
    std::vector<Request> out;
    for (int i = 0; i < 32; ++i) {
      std::string text = "Request " + std::to_string(i) + ": tell me about";
      for (int w = 0; w < i * 3; ++w) text += w % 2 ? " rivers" : " mountains and";
      Request r;
      r.id = std::to_string(i);
      r.prompt = pipeline.tokenize_prompt(text);
      r.settings.keep_logits = true;
      out.push_back(std::move(r));
    }
    return out;
  }

  static std::map<std::string, RequestResult> run(Pipeline& pipeline,
                                                  const std::vector<Request>& batch) {
    Scheduler scheduler(pipeline);
    for (const Request& r : batch) scheduler.submit(r);
    scheduler.run();
    std::map<std::string, RequestResult> out;
    for (RequestResult& r : scheduler.take_finished()) out[r.id] = std::move(r);
    return out;
  }

  PluginHost host_;
};

TEST_F(SchedulerModel, BatchInvariantModeGivesEachRequestItsSoloLogits) {
  auto pipeline = make(true);
  const std::vector<Request> all = requests(*pipeline);
  const auto batched = run(*pipeline, all);
  ASSERT_EQ(batched.size(), all.size());
  for (const Request& r : all) {
    const RequestResult alone = run(*pipeline, {r}).at(r.id);
    const RequestResult& b = batched.at(r.id);
    EXPECT_EQ(b.generated_tokens, alone.generated_tokens) << "request " << r.id;
    ASSERT_EQ(b.logits.size(), alone.logits.size()) << "request " << r.id;
    EXPECT_EQ(0, std::memcmp(b.logits.data(), alone.logits.data(), b.logits.size() * 4))
        << "request " << r.id << ": logits differ from the solo run's";
  }
}

// Regression: a prompt longer than batching.max_step_tokens alone in the
// scheduler makes steps whose chunk does not end the prompt, so no row wants
// logits; the LM head then had 0 rows, and onednn's matmul read the
// quantized activations of a row that did not exist (SIGSEGV in duet run
// --prompts-file). Its tokens must be the session path's (batch-invariant
// mode: chunking changes no bit).
TEST_F(SchedulerModel, APromptLongerThanAStepRunsInChunksAsTheSessionPathRunsIt) {
  auto pipeline = make(true);
  std::string text = "Summarise:";
  for (int w = 0; w < 150; ++w) text += " the river runs past the mill";
  Request r;
  r.id = "long";
  r.prompt = pipeline->tokenize_prompt(text);
  ASSERT_GT(r.prompt.size(), 2u * 256u) << "the prompt must take three steps of 256 rows";
  const RequestResult batched = run(*pipeline, {r}).at("long");
  NullSink sink;
  const RunResult alone = pipeline->run_tokens(r.prompt, sink);
  EXPECT_EQ(batched.generated_tokens, alone.generated_tokens);
}

// The default mode picks kernels by the number of rows in a step (GEMM for
// many, gemv for few), so logits differ in the last bits; greedy tokens
// differ only where two candidates are that close. docs/batching.md states
// the floor this checks.
TEST_F(SchedulerModel, DefaultModeAgreesWithSoloRunsOnAlmostEveryToken) {
  auto pipeline = make(false);
  const std::vector<Request> all = requests(*pipeline);
  const auto batched = run(*pipeline, all);
  size_t agree = 0, total = 0;
  for (const Request& r : all) {
    const RequestResult alone = run(*pipeline, {r}).at(r.id);
    const auto& a = alone.generated_tokens;
    const auto& b = batched.at(r.id).generated_tokens;
    // Tokens agree up to the first difference; after it the two runs
    // continue different texts, so only the prefix is compared.
    size_t same = 0;
    while (same < a.size() && same < b.size() && a[same] == b[same]) ++same;
    agree += same;
    total += a.size();
  }
  const double fraction = static_cast<double>(agree) / static_cast<double>(total);
  std::printf("default mode: %zu of %zu greedy tokens agree with solo runs (%.4f)\n", agree, total,
              fraction);
  EXPECT_GE(fraction, 0.95);
}

}  // namespace
}  // namespace duet
