// ChatTemplate: recognising ChatML templates and applying them. Chat* cases
// use template texts written here and small GGUF files (label: unit);
// SmolLM2* cases read the real model (label: model).
#include "duet/app/chat_template.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <memory>
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

// Qwen2.5's shape: the first system literal is built from the caller's
// message (tools branch); the default sits in a later literal, written with
// "\n" escapes.
constexpr const char* kQwenLikeTemplate =
    "{%- if tools %}{{- '<|im_start|>system\\n' }}{%- if messages[0]['role'] == 'system' %}"
    "{{- messages[0]['content'] }}{%- endif %}{{- '<|im_end|>\\n' }}{%- else %}"
    "{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\\n' + "
    "messages[0]['content'] + '<|im_end|>\\n' }}{%- else %}{{- '<|im_start|>system\\nYou are "
    "Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}{%- endif %}"
    "{%- endif %}";

constexpr const char* kLlama3Template =
    "{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + "
    "'<|end_header_id|>\n\n' + message['content'] + '<|eot_id|>' }}{% endfor %}";

// Phi-3's turns: a family Duet does not recognise.
constexpr const char* kPhi3Template =
    "{% for message in messages %}{{'<|' + message['role'] + '|>' + '\n' + message['content'] + "
    "'<|end|>\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}";

const std::string kNotChatML =
    "model's chat template is not a ChatML, Gemma or Llama 3 template (Duet does not run Jinja "
    "yet); set model.chat_template in the pipeline YAML or model.chat: false";

// Gemma 3's instruction template, shortened to what Duet recognises.
constexpr const char* kGemmaTemplate =
    "{{ bos_token }}{%- for message in loop_messages -%}{{ '<start_of_turn>' + role + '\n' + "
    "message['content'] | trim + '<end_of_turn>\n' }}{%- endfor -%}{%- if add_generation_prompt "
    "-%}{{'<start_of_turn>model\n'}}{%- endif -%}";

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

TEST(ChatTemplate, SmolLM2InsertsItsDefaultSystemPrompt) {
  ChatTemplate t = ChatTemplate::from_text(kSmolLM2Template, "model's chat template");
  EXPECT_EQ(t.default_system(), kSmolLM2Default);
  EXPECT_EQ(t.apply(std::nullopt, "What is 2+2?"),
            std::string("<|im_start|>system\n") + kSmolLM2Default +
                "<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplate, SmolLM2WithASystemMessage) {
  ChatTemplate t = ChatTemplate::from_text(kSmolLM2Template, "model's chat template");
  EXPECT_EQ(t.apply("Answer briefly.", "  Hi \n"),
            "<|im_start|>system\nAnswer briefly.<|im_end|>\n"
            "<|im_start|>user\n  Hi \n<|im_end|>\n<|im_start|>assistant\n");
  // An empty system message is still a system turn, as in the template.
  EXPECT_EQ(t.apply("", "Hi"),
            "<|im_start|>system\n<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatTemplate, FindsTheLiteralDefaultAmongExpressions) {
  ChatTemplate t = ChatTemplate::from_text(kQwenLikeTemplate, "model's chat template");
  EXPECT_EQ(t.default_system(),
            "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.");
}

TEST(ChatTemplate, BuiltinChatMLHasNoDefaultSystemPrompt) {
  ChatTemplate t = ChatTemplate::chatml();
  EXPECT_EQ(t.default_system(), std::nullopt);
  EXPECT_EQ(t.apply(std::nullopt, "Hi"), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplate, RejectsOtherTemplateFamilies) {
  std::string msg =
      config_error([] { ChatTemplate::from_text(kPhi3Template, "model's chat template"); });
  EXPECT_EQ(msg, kNotChatML);
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

TEST_F(ChatModelFile, UsesTheModelsTemplate) {
  write(kSmolLM2Template);
  EXPECT_EQ(ChatTemplate::from_model(GgufFile::open(path_), "").default_system(), kSmolLM2Default);
}

TEST_F(ChatModelFile, OverrideReplacesTheModelsTemplate) {
  write(kPhi3Template);
  GgufFile file = GgufFile::open(path_);
  EXPECT_EQ(ChatTemplate::from_model(file, "chatml").default_system(), std::nullopt);
  EXPECT_EQ(ChatTemplate::from_model(file, kQwenLikeTemplate).default_system()->substr(0, 12),
            "You are Qwen");
  std::string msg = config_error([&] { ChatTemplate::from_model(file, kPhi3Template); });
  EXPECT_EQ(msg.rfind("model.chat_template is not a ChatML, Gemma or Llama 3 template", 0), 0u)
      << msg;
}

TEST_F(ChatModelFile, RejectsANonChatMLModelTemplate) {
  write(kPhi3Template);
  std::string msg = config_error([&] { ChatTemplate::from_model(GgufFile::open(path_), ""); });
  EXPECT_EQ(msg, path_.string() + ": " + kNotChatML);
}

TEST(ChatTemplate, GemmaTurnsWithTheSystemMessageInTheFirstUserTurn) {
  const ChatTemplate t = ChatTemplate::from_text(kGemmaTemplate, "model's chat template");
  EXPECT_EQ(t.name(), "gemma");
  EXPECT_EQ(t.apply(std::nullopt, "Hi"),
            "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(t.apply("Be brief.", "Hi"),
            "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(t.apply_next("And?", true),
            "\n<start_of_turn>user\nAnd?<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(t.apply_next("And?", false),
            "<end_of_turn>\n<start_of_turn>user\nAnd?<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(ChatTemplate::gemma().apply(std::nullopt, "x"), t.apply(std::nullopt, "x"));
}

// The strings llama.cpp's own "llama3" template writes for the same
// messages (llama_chat_apply_template, llama-cpp-python 0.3.36).
TEST(ChatTemplate, Llama3TurnsAsLlamaCppWritesThem) {
  const ChatTemplate t = ChatTemplate::from_text(kLlama3Template, "model's chat template");
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
