// chat_turns.h — two-turn chats through duet::Conversation (what `duet chat`
// runs) against llama.cpp's own chat formatting, for chat_turns_test (the
// real Gemma 3 file) and chat_turns_llama3_test (a tiny Llama-3-style file):
// after the second message, every token of the conversation — both turns'
// prompts and the first answer — equals llama.cpp's tokenization of its
// template applied to the whole conversation (tests/data/chat_turns.json,
// written by tests/chat_turns_fixture.py with llama-cpp-python).
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "duet/app/conversation.h"
#include "duet/app/pipeline.h"
#include "duet/app/pipeline_config.h"

namespace duet::testing {

struct Expected {
  std::vector<std::string> messages;
  int32_t max_new_tokens = 0;
  std::vector<int32_t> answer_ids;        // llama.cpp's first answer
  std::vector<int32_t> conversation_ids;  // its tokens of the templated conversation
};

inline Expected expected(const std::string& name) {
  std::ifstream in(std::filesystem::path(DUET_SOURCE_DIR) / "tests/data/chat_turns.json");
  const nlohmann::json all = nlohmann::json::parse(in);
  const nlohmann::json& j = all.at(name);
  return Expected{j.at("messages").get<std::vector<std::string>>(),
                  j.at("max_new_tokens").get<int32_t>(),
                  j.at("answer_ids").get<std::vector<int32_t>>(),
                  j.at("conversation_ids").get<std::vector<int32_t>>()};
}

// Says both messages; checks the first answer and the conversation's tokens
// before the second answer.
inline void check_two_turns(Pipeline& pipeline, const Expected& want) {
  ASSERT_EQ(want.messages.size(), 2u);
  NullSink sink;
  Conversation chat(pipeline, sink);
  const RunResult first = chat.say(want.messages[0]);
  EXPECT_EQ(first.generated_tokens, want.answer_ids)
      << "the first answer differs from the fixture's (llama.cpp's greedy answer on the Gemma "
         "file; <|eot_id|> alone, forced by the logit bias, on the Llama-3-style one)";
  const RunResult second = chat.say(want.messages[1]);
  const std::span<const int32_t> all = chat.tokens();
  ASSERT_GE(all.size(), second.generated_tokens.size());
  const std::vector<int32_t> before_answer(
      all.begin(), all.end() - static_cast<std::ptrdiff_t>(second.generated_tokens.size()));
  EXPECT_EQ(before_answer, want.conversation_ids);
}

// The same on the pipeline `config` describes, with its plugins loaded.
inline void check_two_turns(PipelineConfig config, const Expected& want) {
  PluginHost host;
  load_pipeline_plugins(config, host);
  auto pipeline = Pipeline::build(config, host);
  check_two_turns(*pipeline, want);
}

}  // namespace duet::testing
