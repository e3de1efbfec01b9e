// duet/app/chat_template.h — wraps a prompt in the chat format the model was tuned on.
//
// A model's own template (tokenizer.chat_template, or model.chat_template
// given as text) is run as Jinja (the vendored minja engine,
// core/third_party/minja): `jinja` below. A file without one gets one of
// three built-in formats, reproduced for one optional system message, one
// user message and the generation prompt, and for the user turns after it in
// a conversation. Contents are inserted verbatim (no trimming).
//
//   jinja   the template rendered with `messages`, `add_generation_prompt`,
//           `bos_token` "" (Duet adds the BOS token itself where the
//           tokenizer asks for one) and `eos_token` the vocabulary's end
//           token; `strftime_now` and `raise_exception` are defined. A later
//           turn is what the template writes after the previous answer.
//   chatml  turns "<|im_start|>{role}\n{content}<|im_end|>\n", generation
//           prompt "<|im_start|>assistant\n".
//   gemma   turns "<start_of_turn>{user|model}\n{content}<end_of_turn>\n",
//           generation prompt "<start_of_turn>model\n", a system message
//           written at the head of the first user turn followed by a blank
//           line (Gemma has no system role).
//   llama3  turns "<|start_header_id|>{role}<|end_header_id|>\n\n{content}<|eot_id|>",
//           generation prompt "<|start_header_id|>assistant<|end_header_id|>\n\n"
//           (Llama 3.x).
// A file without tokenizer.chat_template gets the format whose markers its
// vocabulary holds as tokens (Gemma 3's GGUF files carry no template).
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "duet/export.h"

namespace duet {

class GgufFile;

// Immutable; copyable; const methods are thread-safe.
class DUET_API ChatTemplate {
 public:
  enum class Format { kChatML, kGemma, kLlama3, kJinja };

  // The template for `file`: `override_template` when nonempty (the names
  // "chatml", "gemma" and "llama3" are those formats without a default system prompt;
  // any other value is Jinja template text), else the model's
  // tokenizer.chat_template as Jinja, else the family whose markers the
  // vocabulary holds. Throws duet::Error(kConfig) when none of these gives a
  // format, or a template does not parse, with the fix (set
  // model.chat_template in the pipeline YAML or model.chat: false).
  static ChatTemplate from_model(const GgufFile& file, const std::string& override_template);

  // `text` as a Jinja template; `eos_token` is what it sees as eos_token
  // (and what a closed answer ends with). Throws duet::Error(kConfig)
  // naming `origin` when it does not parse or fails on a plain conversation.
  static ChatTemplate from_jinja(std::string_view text, std::string eos_token,
                                 std::string_view origin);

  // The built-in formats.
  static ChatTemplate chatml() { return ChatTemplate(Format::kChatML, "builtin"); }
  static ChatTemplate gemma() { return ChatTemplate(Format::kGemma, "builtin"); }
  static ChatTemplate llama3() { return ChatTemplate(Format::kLlama3, "builtin"); }

  // The prompt text for one user turn, ending with the generation prompt.
  // `system` nullopt means "no system message" (a template may then write
  // its own default one, as SmolLM2's and Qwen2.5's do); an empty string is
  // an empty system turn. Encode the result with
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

  // One message of a conversation for apply_conversation().
  struct Turn {
    std::string_view role;  // "system", "user", "assistant" or "tool"
    std::string_view content;
    // An assistant turn's calls: the JSON text of an OpenAI "tool_calls"
    // array ([{"id", "type": "function", "function": {"name", "arguments"}}],
    // arguments a JSON text), or empty.
    std::string_view tool_calls = {};
    std::string_view tool_call_id = {};  // a tool turn's, or empty
    std::string_view name = {};          // a tool turn's function, or empty
  };

  // How a model under this template calls tools (docs/serve.md, "Tools"):
  //   kNone    the template cannot take tools: a built-in format, or a
  //            template that writes tools in a syntax Duet does not read
  //   kHermes  the template lists the tools itself and has the model write
  //            "<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>"
  //            (Qwen2.5, Qwen3, Hermes 2 Pro and 3)
  //   kLlama3  the template lists the tools itself and asks for one object
  //            {"name": ..., "parameters": {...}} as the whole answer
  //            (Llama 3.1, 3.2, 3.3)
  //   kJson    the template knows nothing of tools: apply_conversation lists
  //            them in the system message and asks for one JSON object,
  //            {"tool_calls": [{"name", "arguments"}, ...]} or
  //            {"response": TEXT}; earlier calls and results are written as
  //            such JSON in the assistant's and the user's turns
  enum class ToolSyntax { kNone, kHermes, kLlama3, kJson };
  ToolSyntax tool_syntax() const;

  // The prompt text of a whole conversation — an optional system message,
  // then user and assistant messages alternating, ending with a user one;
  // an assistant turn with tool calls is followed by one tool turn or more,
  // which the next assistant turn (or the generation prompt) follows —
  // followed by the generation prompt. `tools` is the JSON text of an
  // OpenAI "tools" array the model may call, or empty. A Jinja template
  // renders it at once (as a server must: a template may write earlier
  // turns differently from the last); a built-in format writes apply() and
  // apply_next() in turn and takes no tools or tool turns.
  // REQUIRES: that order of roles (a Jinja template may raise otherwise:
  // duet::Error(kInputRejected) naming it); tools and tool turns only where
  // tool_syntax() is not kNone. Encode the result like apply()'s.
  std::string apply_conversation(std::span<const Turn> turns, std::string_view tools = {}) const;

  Format format() const { return format_; }
  // "chatml", "gemma", "llama3" or "jinja".
  std::string_view name() const;
  // Where the format came from: "PATH: model's chat template",
  // "model.chat_template", "builtin", or "fallback: the file has no
  // tokenizer.chat_template; its vocabulary has <start_of_turn>".
  const std::string& origin() const { return origin_; }

 private:
  struct Jinja;  // the parsed template (chat_template.cc)

  ChatTemplate(Format format, std::string origin) : format_(format), origin_(std::move(origin)) {}

  void append_turn(std::string& out, std::string_view role, std::string_view content) const;

  Format format_;
  std::string origin_;
  std::shared_ptr<const Jinja> jinja_;  // kJinja only
};

}  // namespace duet
