// duet/app/chat_template.h — wraps a prompt in the chat format the model was tuned on.
//
// Duet does not run Jinja. It recognises three families of templates and
// reproduces them for one optional system message, one user message and the
// generation prompt, and for the user turns after it in a conversation.
// Contents are inserted verbatim (no trimming).
//
//   chatml  turns "<|im_start|>{role}\n{content}<|im_end|>\n", generation
//           prompt "<|im_start|>assistant\n"; recognised by a template text
//           containing both markers. When it also writes a literal system
//           turn ('<|im_start|>system\n...<|im_end|>' with plain text inside
//           one string literal, as SmolLM2 and Qwen2.5 do for conversations
//           that start without a system message), that text is the default
//           system prompt. SmolLM2-Instruct's default is "You are a helpful
//           AI assistant named SmolLM, trained by Hugging Face".
//   gemma   turns "<start_of_turn>{user|model}\n{content}<end_of_turn>\n",
//           generation prompt "<start_of_turn>model\n", a system message
//           written at the head of the first user turn followed by a blank
//           line (Gemma has no system role); recognised by a template text
//           containing "<start_of_turn>" and "<end_of_turn>".
//   llama3  turns "<|start_header_id|>{role}<|end_header_id|>\n\n{content}<|eot_id|>",
//           generation prompt "<|start_header_id|>assistant<|end_header_id|>\n\n";
//           recognised by "<|start_header_id|>", "<|end_header_id|>" and
//           "<|eot_id|>" in the template (Llama 3.x).
// A file without tokenizer.chat_template gets the family whose markers its
// vocabulary holds as tokens (Gemma 3's GGUF files carry no template).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "duet/export.h"

namespace duet {

class GgufFile;

// Immutable; copyable; const methods are thread-safe.
class DUET_API ChatTemplate {
 public:
  enum class Format { kChatML, kGemma, kLlama3 };

  // The template for `file`: `override_template` when nonempty (the names
  // "chatml", "gemma" and "llama3" are those formats without a default system prompt;
  // any other value is template text, recognised like the model's), else
  // the model's tokenizer.chat_template, else the family whose markers the
  // vocabulary holds. Throws duet::Error(kConfig) when none of these gives a
  // format, with the fix (set model.chat_template in the pipeline YAML or
  // model.chat: false).
  static ChatTemplate from_model(const GgufFile& file, const std::string& override_template);

  // Recognises `text` as above; `origin` names where it came from in the
  // error ("model's chat template", "model.chat_template"). Throws
  // duet::Error(kConfig) when it is neither family.
  static ChatTemplate from_text(std::string_view text, std::string_view origin);

  // The plain formats: no default system prompt.
  static ChatTemplate chatml() { return ChatTemplate(Format::kChatML, std::nullopt, "builtin"); }
  static ChatTemplate gemma() { return ChatTemplate(Format::kGemma, std::nullopt, "builtin"); }

  // The prompt text for one user turn, ending with the generation prompt.
  // `system` nullopt means "no system message" (the default one, if any, is
  // used); an empty string is an empty system turn. Encode the result with
  // parse_special = true.
  std::string apply(std::optional<std::string_view> system, std::string_view user) const;

  // The prompt text for a later user turn of the same conversation, to
  // follow the assistant's answer to the turn before: the end of that answer
  // (when `answer_closed`, i.e. it ended with the format's end of turn —
  // "<|im_end|>", "<end_of_turn>", "<|eot_id|>" — itself, just what follows
  // that marker, else the marker too), the user turn and the generation
  // prompt. Encode it like apply()'s
  // result.
  std::string apply_next(std::string_view user, bool answer_closed) const;

  const std::optional<std::string>& default_system() const { return default_system_; }
  Format format() const { return format_; }
  // "chatml", "gemma" or "llama3".
  std::string_view name() const;
  // Where the format came from: "the model's tokenizer.chat_template",
  // "model.chat_template", "builtin", or "fallback: the file has no
  // tokenizer.chat_template; its vocabulary has <start_of_turn>".
  const std::string& origin() const { return origin_; }

 private:
  ChatTemplate(Format format, std::optional<std::string> default_system, std::string origin)
      : format_(format), default_system_(std::move(default_system)), origin_(std::move(origin)) {}

  void append_turn(std::string& out, std::string_view role, std::string_view content) const;

  Format format_;
  std::optional<std::string> default_system_;
  std::string origin_;
};

}  // namespace duet
