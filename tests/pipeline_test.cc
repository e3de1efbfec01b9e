// The pipeline end to end on a tiny random Llama model: the prefill/decode
// invariants, stop conditions, and rejection of bad input.
#include "duet/app/pipeline.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "duet/error.h"
#include "tiny_model.h"

namespace duet {
namespace {

namespace fs = std::filesystem;

class PipelineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(testing::make_temp_dir("pipeline"));
    testing::write_tiny_llama(*dir_ / "tiny.gguf");
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }

  // A pipeline on the tiny model with `overrides` applied to a base config.
  std::unique_ptr<Pipeline> make(std::vector<std::string> overrides = {}) {
    const std::string yaml = R"(model: {path: tiny.gguf}
backend: {plugin: reference}
components:
  kv_cache: {capacity_tokens: 64}
  sampler: {seed: 7, chain: [greedy]}
stages:
  - prefill: {}
  - decode: {max_new_tokens: 8}
)";
    PipelineConfig config = parse_pipeline_config(yaml, "test.yaml", *dir_, overrides);
    load_pipeline_plugins(config, host_);
    return Pipeline::build(config, host_);
  }

  static std::vector<int32_t> prompt(int32_t n) {
    std::vector<int32_t> ids;
    for (int32_t i = 0; i < n; ++i) ids.push_back(3 + (i * 37) % 300);
    return ids;
  }

  static inline fs::path* dir_ = nullptr;
  PluginHost host_;
  NullSink sink_;
};

float max_abs_diff(std::span<const float> a, std::span<const float> b) {
  EXPECT_EQ(a.size(), b.size());
  float m = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

TEST_F(PipelineTest, PrefillThenOneDecodeStepEqualsALongerPrefill) {
  auto p = make();
  const auto ids = prompt(12);
  auto whole = p->new_session(ids);
  whole->forward(12, false);
  std::vector<float> expected(whole->logits().begin(), whole->logits().end());
  whole.reset();

  auto split = p->new_session(ids);
  split->forward(11, false);
  split->forward(1, false);
  EXPECT_LE(max_abs_diff(split->logits(), expected), 1e-4f);
}

TEST_F(PipelineTest, ChunkedPrefillEqualsOneShotPrefill) {
  auto one_shot = make({"stages.0.prefill.all_logits=true"});
  auto chunked = make({"stages.0.prefill.all_logits=true", "stages.0.prefill.chunk_tokens=5"});
  const auto ids = prompt(17);
  RunResult a = one_shot->run_tokens(ids, sink_);
  RunResult b = chunked->run_tokens(ids, sink_);
  ASSERT_EQ(a.prompt_logits.size(), 17u * 320u);
  EXPECT_LE(max_abs_diff(a.prompt_logits, b.prompt_logits), 1e-5f);
  EXPECT_EQ(a.generated_tokens, b.generated_tokens);
}

TEST_F(PipelineTest, GreedyIsReproducibleAndTheCacheIsReusedBetweenRequests) {
  auto p = make();
  RunResult first = p->run_tokens(prompt(6), sink_);
  RunResult second = p->run_tokens(prompt(6), sink_);
  EXPECT_FALSE(first.generated_tokens.empty());
  EXPECT_EQ(first.generated_tokens, second.generated_tokens);
  EXPECT_EQ(first.text, second.text);
}

TEST_F(PipelineTest, SeededDrawsRepeatForTheSameSeedAndDifferAcrossSeeds) {
  auto draw = [&](const std::string& seed) {
    return make({"components.sampler.chain=[]", "components.sampler.seed=" + seed,
                 "stages.1.decode.max_new_tokens=24"})
        ->run_tokens(prompt(5), sink_)
        .generated_tokens;
  };
  EXPECT_EQ(draw("1"), draw("1"));
  EXPECT_NE(draw("1"), draw("2"));
}

TEST_F(PipelineTest, AFullCacheEndsGenerationWithFinishLength) {
  auto p = make({"components.kv_cache.capacity_tokens=16", "stages.1.decode.max_new_tokens=100"});
  RunResult r = p->run_tokens(prompt(10), sink_);
  EXPECT_EQ(r.finish, FinishReason::kLength);
  // 10 prompt positions + 6 decoded ones fill the cache; the 7th token is
  // sampled from the last logits but has no room to be run.
  EXPECT_EQ(r.generated_tokens.size(), 7u);
}

TEST_F(PipelineTest, AStopStringEndsGenerationAndIsNotEmitted) {
  auto p = make({"stages.1.decode.max_new_tokens=16"});
  RunResult free_run = p->run_tokens(prompt(4), sink_);
  // Two ASCII bytes past the start, so the stop string is whole characters.
  size_t at = 1;
  auto ascii = [](char ch) { return static_cast<unsigned char>(ch) < 0x80; };
  while (at + 1 < free_run.text.size() &&
         !(ascii(free_run.text[at]) && ascii(free_run.text[at + 1])))
    ++at;
  ASSERT_LT(at + 1, free_run.text.size())
      << "the tiny model should produce some ASCII text: " << free_run.text;
  const std::string stop = free_run.text.substr(at, 2);
  auto stopped =
      make({"stages.1.decode.max_new_tokens=16", "stages.1.decode.stop=[\"" + stop + "\"]"});
  RunResult r = stopped->run_tokens(prompt(4), sink_);
  EXPECT_EQ(r.finish, FinishReason::kStop);
  EXPECT_EQ(r.text, free_run.text.substr(0, free_run.text.find(stop)));
}

TEST_F(PipelineTest, RejectsBadPromptsWithInputRejected) {
  auto p = make({"components.kv_cache.capacity_tokens=16"});
  auto rejected = [&](std::vector<int32_t> ids, const std::string& substring) {
    try {
      p->run_tokens(ids, sink_);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInputRejected);
      EXPECT_NE(std::string(e.what()).find(substring), std::string::npos) << e.what();
    }
  };
  rejected({}, "no tokens");
  rejected({5, 320}, "prompt token 1 has id 320, outside the vocabulary [0, 320)");
  rejected({5, -1}, "has id -1");
  rejected(prompt(17),
           "prompt has 17 tokens but the KV cache has room for 16; raise "
           "components.kv_cache.capacity_tokens");
  EXPECT_THROW(p->tokenize_prompt(""), Error);
  // The pipeline still works after rejecting input.
  EXPECT_FALSE(p->run_tokens(prompt(3), sink_).generated_tokens.empty());
}

TEST_F(PipelineTest, ChatPromptsUseTheTemplateAndSpecialTokens) {
  auto p = make({"model.chat=true", "model.system=Be brief."});
  auto ids = p->tokenize_prompt("hi");
  const std::string text = p->tokenizer().decode(ids);
  EXPECT_EQ(text,
            "<|im_start|>system\nBe "
            "brief.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(ids.front(), 1);  // <|im_start|> as one token
}

// Regression: the user's text was encoded with control tokens parsed, so a
// prompt could close its own turn.
TEST_F(PipelineTest, ControlTokensTypedInAChatPromptStayText) {
  auto p = make({"model.chat=true"});
  auto ids = p->tokenize_prompt("<|im_end|>");
  const auto im_end = *p->tokenizer().find_token("<|im_end|>");
  EXPECT_EQ(std::count(ids.begin(), ids.end(), im_end), 1) << "only the template's own end of turn";
  EXPECT_EQ(p->tokenizer().decode(ids),
            "<|im_start|>user\n<|im_end|><|im_end|>\n<|im_start|>assistant\n");
}

// Sessions open at once hold blocks of one cache side by side: each gets
// the logits it gets alone. With the cache in one block, the second finds no
// room and is refused with the sizes (kInputRejected), never a crash.
TEST_F(PipelineTest, SessionsOpenAtOnceShareTheCacheByBlocks) {
  auto p = make({"components.kv_cache.block_tokens=4"});
  std::vector<float> alone;
  {
    auto s = p->new_session(prompt(5));
    s->forward(5, false);
    alone.assign(s->logits().begin(), s->logits().end());
  }
  auto first = p->new_session(prompt(3));
  first->forward(3, false);
  auto second = p->new_session(prompt(5));
  second->forward(5, false);
  EXPECT_EQ(std::vector<float>(second->logits().begin(), second->logits().end()), alone);
  EXPECT_EQ(first->cached(), 3);
  EXPECT_EQ(second->cached(), 5);

  auto whole = make();
  auto holder = whole->new_session(prompt(3));
  holder->forward(3, false);
  auto refused = whole->new_session(prompt(3));
  try {
    refused->forward(3, false);
    FAIL() << "a second session found room in a cache of one block";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInputRejected) << e.what();
  }
  holder.reset();
  EXPECT_NO_THROW(refused->forward(3, false));
}

TEST_F(PipelineTest, ADecodeStageWithoutAStageBeforeItIsAConfigError) {
  try {
    make({"stages=[{decode: {}}]"});
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kConfig);
    EXPECT_NE(std::string(e.what()).find("the decode stage needs logits from a stage before it"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace duet
