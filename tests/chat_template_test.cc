// ChatTemplate: models' own templates run as Jinja (against renders by
// Python's jinja2, tests/data/chat_templates.json from
// tests/chat_template_oracle.py), the built-in formats, and the choice
// between them. Chat*/Jinja* cases use template texts and small GGUF files
// (label: unit); SmolLM2* cases read the real model (label: model).
#include "duet/app/chat_template.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "duet/app/gguf.h"
#include "duet/error.h"
#include "duet/tokenizer.h"
#include "model_files.h"

namespace duet {
namespace {

// SmolLM2-135M-Instruct's tokenizer.chat_template, as stored in its GGUF.
constexpr const char* kSmolLM2Template =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}";

constexpr const char* kSmolLM2Default =
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face";

// Phi-3's turns: a family Duet has no built-in format for.
constexpr const char* kPhi3Template =
    "{% for message in messages %}{{'<|' + message['role'] + '|>' + '\n' + message['content'] + "
    "'<|end|>\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}";

template <typename F>
std::string config_error(F f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kConfig) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no duet::Error thrown";
  return "";
}

ChatTemplate jinja(const char* text) {
  return ChatTemplate::from_jinja(text, "<|im_end|>", "test");
}

TEST(ChatTemplate, SmolLM2WritesItsDefaultSystemPrompt) {
  ChatTemplate t = jinja(kSmolLM2Template);
  EXPECT_EQ(t.name(), "jinja");
  EXPECT_EQ(t.apply(std::nullopt, "What is 2+2?"),
            std::string("<|im_start|>system\n") + kSmolLM2Default +
                "<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplate, SmolLM2WithASystemMessage) {
  ChatTemplate t = jinja(kSmolLM2Template);
  EXPECT_EQ(t.apply("Answer briefly.", "  Hi \n"),
            "<|im_start|>system\nAnswer briefly.<|im_end|>\n"
            "<|im_start|>user\n  Hi \n<|im_end|>\n<|im_start|>assistant\n");
  // An empty system message is still a system turn, as in the template.
  EXPECT_EQ(t.apply("", "Hi"),
            "<|im_start|>system\n<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatTemplate, BuiltinChatMLWritesNoSystemTurn) {
  ChatTemplate t = ChatTemplate::chatml();
  EXPECT_EQ(t.apply(std::nullopt, "Hi"), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplate, RefusesATemplateThatDoesNotParse) {
  std::string msg = config_error([] { jinja("{% for message in %}{{ message }}"); });
  EXPECT_EQ(msg.rfind("test is not a Jinja template Duet can run (", 0), 0u) << msg;
  EXPECT_NE(msg.find("set model.chat_template in the pipeline YAML or model.chat: false"),
            std::string::npos)
      << msg;
}

// The oracle's cases: each template rendered by jinja2 for a user message,
// a system and a user message, and a later turn after an answer.
struct OracleCase {
  std::string name, eos, turn_end, text;
  std::vector<std::string> renders;
};

std::vector<OracleCase> oracle_cases() {
  std::ifstream in(std::string(DUET_SOURCE_DIR) + "/tests/data/chat_templates.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  std::vector<OracleCase> out;
  for (const auto& c : j.at("cases")) {
    out.push_back({c.at("name"), c.at("eos_token"), c.at("turn_end"), c.at("template"),
                   c.at("renders").get<std::vector<std::string>>()});
  }
  return out;
}

// What follows the answer in a render of user, assistant, user.
std::string after_answer(const std::string& render) {
  const std::string answer =
      "\x01"
      "duet-answer\x01";
  return render.substr(render.find(answer) + answer.size());
}

TEST(JinjaTemplates, RenderAsJinja2Does) {
  const std::vector<OracleCase> cases = oracle_cases();
  ASSERT_EQ(cases.size(), 4u);
  for (const OracleCase& c : cases) {
    SCOPED_TRACE(c.name);
    const ChatTemplate t = ChatTemplate::from_jinja(c.text, c.eos, c.name);
    EXPECT_EQ(t.apply(std::nullopt, "Hi"), c.renders[0]);
    EXPECT_EQ(t.apply("Be brief.", "Hi"), c.renders[1]);
    // A whole conversation at once, as duet serve renders one.
    const std::string earlier =
        "\x01"
        "duet-earlier-user\x01";
    const std::string answer =
        "\x01"
        "duet-answer\x01";
    const std::vector<ChatTemplate::Turn> turns = {
        {"user", earlier}, {"assistant", answer}, {"user", "And?"}};
    EXPECT_EQ(t.apply_conversation(turns), c.renders[2]);
    const std::string next = after_answer(c.renders[2]);
    EXPECT_EQ(t.apply_next("And?", false), next);
    // A closed answer ended with its end token, which is in the cache: the
    // later turn starts after it.
    ASSERT_EQ(next.rfind(c.turn_end, 0), 0u) << next;
    EXPECT_EQ(t.apply_next("And?", true), next.substr(c.turn_end.size()));
  }
}

// Two implementations of one format agree: the Gemma 3 and Llama 3
// templates run as Jinja, and Duet's built-in formats.
TEST(JinjaTemplates, AgreeWithTheBuiltInFormats) {
  for (const OracleCase& c : oracle_cases()) {
    if (c.name != "gemma3" && c.name != "llama3") continue;
    SCOPED_TRACE(c.name);
    const ChatTemplate t = ChatTemplate::from_jinja(c.text, c.eos, c.name);
    const ChatTemplate builtin =
        c.name == "gemma3" ? ChatTemplate::gemma() : ChatTemplate::llama3();
    EXPECT_EQ(t.apply(std::nullopt, "Hi"), builtin.apply(std::nullopt, "Hi"));
    EXPECT_EQ(t.apply("Be brief.", "Hi"), builtin.apply("Be brief.", "Hi"));
    EXPECT_EQ(t.apply_next("And?", false), builtin.apply_next("And?", false));
    EXPECT_EQ(t.apply_next("And?", true), builtin.apply_next("And?", true));
    const std::vector<ChatTemplate::Turn> turns = {
        {"system", "S"}, {"user", "Hi"}, {"assistant", "Hello"}, {"user", "And?"}};
    EXPECT_EQ(t.apply_conversation(turns), builtin.apply_conversation(turns));
  }
}

// Tools through templates that write them (Qwen2.5's, and one of Llama 3.x's
// protocol): the tools listed, an assistant's calls (arguments sent as JSON
// text, as OpenAI clients send them) and the tools' results, as jinja2
// renders them.
TEST(JinjaTemplates, ToolsCallsAndResultsRenderAsJinja2Does) {
  std::ifstream in(std::string(DUET_SOURCE_DIR) + "/tests/data/chat_templates.json");
  const nlohmann::ordered_json j = nlohmann::ordered_json::parse(in);
  const std::string tools = j.at("tools").dump();
  const auto& conversations = j.at("tool_conversations");
  ASSERT_EQ(j.at("tool_cases").size(), 2u);
  for (const auto& c : j.at("tool_cases")) {
    const std::string name = c.at("name").get<std::string>();
    SCOPED_TRACE(name);
    std::ifstream file(std::string(DUET_SOURCE_DIR) + "/tests/data/templates/" +
                       c.at("file").get<std::string>());
    const std::string text{std::istreambuf_iterator<char>(file), {}};
    const ChatTemplate t =
        ChatTemplate::from_jinja(text, c.at("eos_token").get<std::string>(), name);
    EXPECT_EQ(t.tool_syntax(), name == "qwen2.5" ? ChatTemplate::ToolSyntax::kHermes
                                                 : ChatTemplate::ToolSyntax::kLlama3);
    ASSERT_EQ(c.at("renders").size(), conversations.size());
    for (size_t k = 0; k < conversations.size(); ++k) {
      SCOPED_TRACE(k);
      std::vector<std::string> texts;  // the views of the turns point here
      texts.reserve(64);
      std::vector<ChatTemplate::Turn> turns;
      for (const auto& m : conversations[k].at("messages")) {
        const auto field = [&](const char* key) -> std::string_view {
          if (!m.contains(key)) return {};
          return texts.emplace_back(m.at(key).get<std::string>());
        };
        std::string_view calls;
        if (m.contains("tool_calls")) {
          nlohmann::ordered_json list = m.at("tool_calls");
          for (auto& call : list)
            call["function"]["arguments"] = call["function"]["arguments"].dump();
          calls = texts.emplace_back(list.dump());
        }
        const std::string_view role = field("role");
        const std::string_view content = field("content");
        turns.push_back({role, content, calls, field("tool_call_id"), field("name")});
      }
      const bool offered = conversations[k].at("tools").get<bool>();
      EXPECT_EQ(t.apply_conversation(turns, offered ? tools : ""),
                c.at("renders")[k].get<std::string>());
    }
  }
}

// A template that knows nothing of tools: Duet lists them in the system
// message and asks for JSON; calls and results are written in the turns.
TEST(JinjaTemplates, ATemplateWithoutToolsGetsThemListedAndAnswersAsJson) {
  const ChatTemplate t = jinja(kSmolLM2Template);
  EXPECT_EQ(t.tool_syntax(), ChatTemplate::ToolSyntax::kJson);
  const std::string tools =
      R"([{"type": "function", "function": {"name": "get_time", "description": "Now."}}])";
  const std::string calls =
      R"([{"id": "c1", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}])";
  const std::vector<ChatTemplate::Turn> turns = {{"user", "Time?"},
                                                 {"assistant", "", calls},
                                                 {"tool", "noon", {}, "c1", "get_time"},
                                                 {"tool", "UTC", {}, "c2"}};
  const std::string out = t.apply_conversation(turns, tools);
  const size_t system = out.find("<|im_start|>system\n");
  ASSERT_EQ(system, 0u) << out;
  EXPECT_EQ(out.find(kSmolLM2Default), std::string::npos) << out;  // replaced by the tools' turn
  EXPECT_NE(out.find("{\"tool_calls\": [{\"name\": NAME"), std::string::npos) << out;
  EXPECT_NE(out.find("\"name\": \"get_time\""), std::string::npos) << out;
  EXPECT_NE(out.find("<|im_start|>assistant\n{\"tool_calls\":[{\"name\":\"get_time\","
                     "\"arguments\":{}}]}<|im_end|>"),
            std::string::npos)
      << out;
  // Both results in one user turn, then the generation prompt.
  EXPECT_NE(out.find("<|im_start|>user\nResult of tool call c1 (get_time):\nnoon\n\nResult of "
                     "tool call c2:\nUTC<|im_end|>\n<|im_start|>assistant\n"),
            std::string::npos)
      << out;
  // Built-in formats take no tools.
  EXPECT_EQ(ChatTemplate::chatml().tool_syntax(), ChatTemplate::ToolSyntax::kNone);
}

TEST(JinjaTemplates, ARaisingTemplateRefusesTheConversationNamingIt) {
  for (const OracleCase& c : oracle_cases()) {
    if (c.name != "gemma3") continue;
    const ChatTemplate t = ChatTemplate::from_jinja(c.text, c.eos, "gemma3's template");
    // A template that raises on a plain turn is refused at load.
    const std::string raising = "{{ raise_exception('no chat here') }}";
    std::string msg = config_error([&] { ChatTemplate::from_jinja(raising, "", "x's template"); });
    EXPECT_NE(msg.find("no chat here"), std::string::npos) << msg;
    EXPECT_EQ(t.name(), "jinja");
  }
}

// A GGUF file holding only `chat_template` (or none), removed afterwards.
class ChatModelFile : public ::testing::Test {
 protected:
  void write(const char* chat_template) {
    GgufWriter w;
    w.set_string("general.architecture", "llama");
    if (chat_template != nullptr) w.set_string("tokenizer.chat_template", chat_template);
    w.write(path_);
  }
  void TearDown() override { std::filesystem::remove(path_); }

  std::filesystem::path path_ = std::filesystem::temp_directory_path() /
                                ("duet_chat_template_test_" + std::to_string(::getpid()) + ".gguf");
};

TEST_F(ChatModelFile, RunsTheModelsTemplate) {
  write(kSmolLM2Template);
  const ChatTemplate t = ChatTemplate::from_model(GgufFile::open(path_), "");
  EXPECT_EQ(t.name(), "jinja");
  EXPECT_EQ(t.origin(), path_.string() + ": model's chat template");
  EXPECT_EQ(
      t.apply(std::nullopt, "Hi").rfind(std::string("<|im_start|>system\n") + kSmolLM2Default, 0),
      0u);
}

TEST_F(ChatModelFile, OverrideReplacesTheModelsTemplate) {
  write(kPhi3Template);
  GgufFile file = GgufFile::open(path_);
  EXPECT_EQ(ChatTemplate::from_model(file, "chatml").name(), "chatml");
  EXPECT_EQ(ChatTemplate::from_model(file, "").apply(std::nullopt, "Hi"),
            "<|user|>\nHi<|end|>\n<|assistant|>\n");
  const ChatTemplate own = ChatTemplate::from_model(file, kSmolLM2Template);
  EXPECT_EQ(own.origin(), "model.chat_template");
  EXPECT_EQ(own.apply("S", "Hi"),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n");
  std::string msg = config_error([&] { ChatTemplate::from_model(file, "{% if %}"); });
  EXPECT_EQ(msg.rfind("model.chat_template is not a Jinja template Duet can run", 0), 0u) << msg;
}

TEST(ChatTemplate, GemmaTurnsWithTheSystemMessageInTheFirstUserTurn) {
  const ChatTemplate t = ChatTemplate::gemma();
  EXPECT_EQ(t.name(), "gemma");
  EXPECT_EQ(t.apply(std::nullopt, "Hi"),
            "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(t.apply("Be brief.", "Hi"),
            "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(t.apply_next("And?", true),
            "\n<start_of_turn>user\nAnd?<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(t.apply_next("And?", false),
            "<end_of_turn>\n<start_of_turn>user\nAnd?<end_of_turn>\n<start_of_turn>model\n");
}

// The strings llama.cpp's own "llama3" template writes for the same
// messages (llama_chat_apply_template, llama-cpp-python 0.3.36).
TEST(ChatTemplate, Llama3TurnsAsLlamaCppWritesThem) {
  const ChatTemplate t = ChatTemplate::llama3();
  EXPECT_EQ(t.name(), "llama3");
  const std::string first = t.apply("Be brief.", "Hi");
  EXPECT_EQ(first,
            "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(first + "Hello!" + t.apply_next("And?", false),
            "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nAnd?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(t.apply_next("And?", true).rfind("<|start_header_id|>user", 0), 0u);
}

TEST_F(ChatModelFile, AFileWithoutTemplateGetsTheFamilyItsVocabularyHolds) {
  GgufWriter w;
  w.set_string("general.architecture", "gemma3");
  const std::vector<std::string> tokens = {"<pad>", "<start_of_turn>", "<end_of_turn>"};
  w.set_string_array("tokenizer.ggml.tokens", tokens);
  w.write(path_);
  const ChatTemplate t = ChatTemplate::from_model(GgufFile::open(path_), "");
  EXPECT_EQ(t.name(), "gemma");
  EXPECT_NE(t.origin().find("fallback"), std::string::npos) << t.origin();
  EXPECT_EQ(ChatTemplate::from_model(GgufFile::open(path_), "chatml").name(), "chatml");
}

TEST_F(ChatModelFile, RejectsAModelWithoutTemplate) {
  write(nullptr);
  std::string msg = config_error([&] { ChatTemplate::from_model(GgufFile::open(path_), ""); });
  EXPECT_NE(msg.find("model has no chat template (tokenizer.chat_template)"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("model.chat: false"), std::string::npos) << msg;
}

// --- the real model ------------------------------------------------------------

using testing::model_path;

TEST(SmolLM2ChatTemplate, AppliesTheModelsTemplate) {
  const std::filesystem::path path = model_path();
  ASSERT_TRUE(std::filesystem::exists(path)) << testing::missing_model_message(path);
  GgufFile file = GgufFile::open(path);
  ASSERT_EQ(file.get_string("tokenizer.chat_template"), kSmolLM2Template)
      << "the model's template changed; update kSmolLM2Template and the expectations";
  ChatTemplate t = ChatTemplate::from_model(file, "");
  const std::string without = t.apply(std::nullopt, "Hi");
  EXPECT_EQ(without, std::string("<|im_start|>system\n") + kSmolLM2Default +
                         "<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(t.apply("Be brief.", "Hi"),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n");

  // The prompt's turn markers become single control tokens.
  std::unique_ptr<Tokenizer> tok = load_tokenizer(file);
  std::vector<int32_t> ids = tok->encode(without, true);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 1), 3);  // <|im_start|>
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 2), 2);  // <|im_end|>
  EXPECT_EQ(tok->decode(ids), without);
}

}  // namespace
}  // namespace duet
