// duet/app/chat_template.h — wraps a prompt in the chat format the model was tuned on.
//
// Duet does not run Jinja. It recognises the ChatML family of templates, whose
// turns are "<|im_start|>{role}\n{content}<|im_end|>\n", and reproduces them
// for one optional system message, one user message and the generation prompt
// "<|im_start|>assistant\n", and for the user turns after it in a
// conversation. Contents are inserted verbatim (no trimming).
//
// Recognised: a template text containing both "<|im_start|>" and
// "<|im_end|>". When it also writes a literal system turn
// ('<|im_start|>system\n...<|im_end|>' with plain text inside one string
// literal, as SmolLM2 and Qwen2.5 do for conversations that start without a
// system message), that text is the default system prompt, used when apply()
// gets no system message. SmolLM2-Instruct's default is "You are a helpful AI
// assistant named SmolLM, trained by Hugging Face".
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
  // The template for `file`: `override_template` when nonempty (the name
  // "chatml" is plain ChatML without a default system prompt; any other value
  // is template text, recognised like the model's), else the model's
  // tokenizer.chat_template. Throws duet::Error(kConfig) when the model has no
  // template, or the template is not ChatML, with the fix (set
  // model.chat_template in the pipeline YAML or model.chat: false).
  static ChatTemplate from_model(const GgufFile& file, const std::string& override_template);

  // Recognises `text` as above; `origin` names where it came from in the
  // error ("model's chat template", "model.chat_template"). Throws
  // duet::Error(kConfig) when it is not ChatML.
  static ChatTemplate from_text(std::string_view text, std::string_view origin);

  // Plain ChatML: no default system prompt.
  static ChatTemplate chatml() { return ChatTemplate(std::nullopt); }

  // The prompt text for one user turn, ending with the generation prompt.
  // `system` nullopt means "no system message" (the default one, if any, is
  // used); an empty string is an empty system turn. Encode the result with
  // parse_special = true.
  std::string apply(std::optional<std::string_view> system, std::string_view user) const;

  // The prompt text for a later user turn of the same conversation, to
  // follow the assistant's answer to the turn before: the end of that answer
  // (just "\n" when `answer_closed`, i.e. it ended with "<|im_end|>" itself,
  // else "<|im_end|>\n"), the user turn and the generation prompt. Encode
  // it like apply()'s result.
  std::string apply_next(std::string_view user, bool answer_closed) const;

  const std::optional<std::string>& default_system() const { return default_system_; }

 private:
  explicit ChatTemplate(std::optional<std::string> default_system)
      : default_system_(std::move(default_system)) {}

  std::optional<std::string> default_system_;
};

}  // namespace duet
