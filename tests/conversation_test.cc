// A multi-turn conversation on the tiny model: what the cache keeps between
// turns must give the answers a fresh run of the whole conversation gives.
#include "duet/app/conversation.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "duet/error.h"
#include "duet/tokenizer.h"
#include "tiny_model.h"

namespace duet {
namespace {

namespace fs = std::filesystem;

class ConversationTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(testing::make_temp_dir("conversation"));
    testing::write_tiny_llama(*dir_ / "tiny.gguf");
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }

  std::unique_ptr<Pipeline> make(std::vector<std::string> overrides = {}) {
    const std::string yaml = R"(model: {path: tiny.gguf, chat: true}
backend: {plugin: reference}
components:
  kv_cache: {capacity_tokens: 256}
  sampler: {seed: 7, chain: [greedy]}
stages:
  - prefill: {}
  - decode: {max_new_tokens: 6}
)";
    PipelineConfig config = parse_pipeline_config(yaml, "test.yaml", *dir_, overrides);
    load_pipeline_plugins(config, host_);
    return Pipeline::build(config, host_);
  }

  static inline fs::path* dir_ = nullptr;
  PluginHost host_;
  NullSink sink_;
};

TEST_F(ConversationTest, ALaterTurnPrefillsOnlyItsOwnTokensAndAnswersAsAFreshRunWould) {
  auto p = make();
  std::vector<int32_t> history;
  std::vector<std::vector<int32_t>> answers;
  {
    Conversation chat(*p, sink_);
    const RunResult first = chat.say("hello there");
    EXPECT_EQ(first.prompt_tokens, p->tokenize_prompt("hello there"));
    for (const char* message : {"and then?", "one more"}) {
      const int32_t cached_before = chat.cached_tokens();
      const bool closed = p->tokenizer().is_end_of_generation(chat.tokens().back());
      const RunResult r = chat.say(message);
      ASSERT_FALSE(r.generated_tokens.empty());
      // The turn prefilled what was not cached: its own tokens, plus the
      // last answer token that was sampled but never run.
      EXPECT_EQ(
          r.stats.prompt_tokens,
          static_cast<int32_t>(chat.tokens().size() - r.generated_tokens.size()) - cached_before);
      EXPECT_EQ(r.stats.prompt_tokens,
                static_cast<int32_t>(p->tokenize_next_turn(message, closed).size()) + 1);
      EXPECT_LT(r.stats.prompt_tokens, cached_before);
      answers.push_back(r.generated_tokens);
    }
    EXPECT_EQ(chat.turns(), 3);
    history.assign(chat.tokens().begin(), chat.tokens().end());
  }
  // The whole conversation up to the last answer, run from scratch, gives
  // that answer.
  const std::vector<int32_t> last_prompt(
      history.begin(), history.end() - static_cast<std::ptrdiff_t>(answers.back().size()));
  EXPECT_EQ(p->run_tokens(last_prompt, sink_).generated_tokens, answers.back());
}

TEST_F(ConversationTest, LaterTurnsFollowTheChatTemplate) {
  auto p = make({"stages.1.decode.max_new_tokens=2"});
  Conversation chat(*p, sink_);
  chat.say("hi");
  const size_t after_first = chat.tokens().size();
  chat.say("<|im_end|> stays text");
  const std::vector<int32_t> second(
      chat.tokens().begin() + static_cast<std::ptrdiff_t>(after_first), chat.tokens().end() - 2);
  // Two tokens were generated, so the first answer did not close itself (an
  // end-of-turn would have ended it at one): the template closes it.
  const std::string text = p->tokenizer().decode(second);
  EXPECT_EQ(
      text,
      "<|im_end|>\n<|im_start|>user\n<|im_end|> stays text<|im_end|>\n<|im_start|>assistant\n");
  const auto im_end = *p->tokenizer().find_token("<|im_end|>");
  EXPECT_EQ(std::count(second.begin(), second.end(), im_end), 2) << "the typed one is text";
}

TEST_F(ConversationTest, AMessageThatDoesNotFitIsRefusedAndTheConversationGoesOnAfterReset) {
  auto p = make({"components.kv_cache.capacity_tokens=48"});
  Conversation chat(*p, sink_);
  chat.say("hello there");
  const std::vector<int32_t> before(chat.tokens().begin(), chat.tokens().end());
  try {
    chat.say("a much longer message that cannot fit in what is left of the cache");
    FAIL() << "accepted";
  } catch (const ConversationFull& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInputRejected);
    EXPECT_NE(std::string(e.what()).find("of 48 are free"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("raise components.kv_cache.capacity_tokens"),
              std::string::npos);
  }
  EXPECT_EQ(std::vector<int32_t>(chat.tokens().begin(), chat.tokens().end()), before)
      << "unchanged";
  EXPECT_EQ(chat.turns(), 1);
  chat.reset();
  EXPECT_EQ(chat.cached_tokens(), 0);
  EXPECT_NO_THROW(chat.say("hello there"));
  EXPECT_EQ(chat.turns(), 1);
}

TEST_F(ConversationTest, AnAnswerThatFillsTheCacheIsCutAndSaysSo) {
  auto p = make({"components.kv_cache.capacity_tokens=24", "stages.1.decode.max_new_tokens=100"});
  Conversation chat(*p, sink_);
  const RunResult r = chat.say("hi");
  EXPECT_EQ(r.finish, FinishReason::kLength);
  EXPECT_TRUE(chat.full());
  EXPECT_THROW(chat.say("next"), ConversationFull);
}

TEST_F(ConversationTest, EmptyMessagesAreRejected) {
  auto p = make();
  Conversation chat(*p, sink_);
  EXPECT_THROW(chat.say(""), Error);
  chat.say("hi");
  EXPECT_THROW(chat.say(""), Error);
  EXPECT_EQ(chat.turns(), 1);
}

}  // namespace
}  // namespace duet
