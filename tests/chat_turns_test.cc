// Two-turn chats through duet::Conversation (what `duet chat` runs) against
// llama.cpp's own chat formatting: after the second message, every token of
// the conversation — both turns' prompts and the first answer — equals
// llama.cpp's tokenization of its template applied to the whole
// conversation (tests/data/chat_turns.json, written by
// tests/chat_turns_fixture.py with llama-cpp-python). The files:
// - Gemma 3 270M Q4_K_M, the real file, which has no template: Duet's
//   built-in Gemma format against llama.cpp's built-in "gemma". The first
//   answer is greedy and must equal llama.cpp's greedy answer on the file.
// - a tiny Llama-3-style file (tests/tiny_model.h, chat "llama3") whose
//   template is Meta-Llama-3-8B-Instruct's, run as Jinja by Duet and
//   recognised as "llama3" by llama.cpp. Its weights are random, so its
//   answers are made empty (<|eot_id|> first, by a logit bias).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "duet/app/conversation.h"
#include "duet/app/pipeline.h"
#include "duet/app/pipeline_config.h"
#include "model_files.h"
#include "tiny_model.h"

namespace duet {
namespace {

namespace fs = std::filesystem;

struct Expected {
  std::vector<std::string> messages;
  int32_t max_new_tokens = 0;
  std::vector<int32_t> answer_ids;        // llama.cpp's first answer
  std::vector<int32_t> conversation_ids;  // its tokens of the templated conversation
};

Expected expected(const std::string& name) {
  std::ifstream in(fs::path(DUET_SOURCE_DIR) / "tests/data/chat_turns.json");
  const nlohmann::json all = nlohmann::json::parse(in);
  const nlohmann::json& j = all.at(name);
  return Expected{j.at("messages").get<std::vector<std::string>>(),
                  j.at("max_new_tokens").get<int32_t>(),
                  j.at("answer_ids").get<std::vector<int32_t>>(),
                  j.at("conversation_ids").get<std::vector<int32_t>>()};
}

// Says both messages; checks the first answer and the conversation's tokens
// before the second answer.
void check_two_turns(Pipeline& pipeline, const Expected& want) {
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

TEST(ChatTurns, Gemma3TwoTurnsEqualLlamaCppsGemmaTemplate) {
  const fs::path model = testing::gemma_path();
  ASSERT_TRUE(fs::exists(model)) << testing::missing_model_message(model);
  const Expected want = expected("gemma3");
  PipelineConfig config = parse_pipeline_config(
      default_pipeline_yaml(model), "default pipeline", "",
      {"model.chat=true", "backend.plugin=onednn", "backend.options.threads=2",
       "stages.1.decode.max_new_tokens=" + std::to_string(want.max_new_tokens)});
  PluginHost host;
  load_pipeline_plugins(config, host);
  auto pipeline = Pipeline::build(config, host);
  check_two_turns(*pipeline, want);
}

TEST(ChatTurns, ALlama3StyleFileTwoTurnsEqualLlamaCppsLlama3Template) {
  const fs::path dir = fs::path(DUET_BUILD_DIR) / "chat_turns";
  fs::create_directories(dir);
  testing::TinyLlama shape;
  shape.chat = "llama3";
  testing::write_tiny_llama(dir / "llama3.gguf", shape);  // the fixture script reads it too
  const Expected want = expected("llama3");
  const std::string yaml =
      "model: {path: llama3.gguf, chat: true}\n"
      "backend: {plugin: reference}\n"
      "components:\n"
      "  kv_cache: {capacity_tokens: 256}\n"
      "  sampler: {seed: 1, chain: [{logit_bias: {\"4\": 100}}, greedy]}\n"
      "stages:\n"
      "  - prefill: {}\n"
      "  - decode: {max_new_tokens: " +
      std::to_string(want.max_new_tokens) + "}\n";
  PipelineConfig config = parse_pipeline_config(yaml, "llama3.yaml", dir, {});
  PluginHost host;
  load_pipeline_plugins(config, host);
  auto pipeline = Pipeline::build(config, host);
  check_two_turns(*pipeline, want);
}

}  // namespace
}  // namespace duet
