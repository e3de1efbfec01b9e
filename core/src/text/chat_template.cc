#include "duet/app/chat_template.h"

#include <algorithm>

#include "duet/app/gguf.h"
#include "duet/error.h"

namespace duet {
namespace {

constexpr std::string_view kStart = "<|im_start|>";
constexpr std::string_view kEnd = "<|im_end|>";
constexpr std::string_view kGemmaStart = "<start_of_turn>";
constexpr std::string_view kGemmaEnd = "<end_of_turn>";
constexpr std::string_view kHeaderStart = "<|start_header_id|>";
constexpr std::string_view kHeaderEnd = "<|end_header_id|>";
constexpr std::string_view kEot = "<|eot_id|>";

// How each format writes a turn: "{open}{role}{after_role}{content}{close}{separator}".
struct Spelling {
  std::string_view open, after_role, close, separator, assistant;
  bool system_turn;  // false: the system message heads the first user turn
};

const Spelling& spelling(ChatTemplate::Format format) {
  static constexpr Spelling kChatML{kStart, "\n", kEnd, "\n", "assistant", true};
  static constexpr Spelling kGemma{kGemmaStart, "\n", kGemmaEnd, "\n", "model", false};
  static constexpr Spelling kLlama3{kHeaderStart, "<|end_header_id|>\n\n", kEot, "", "assistant",
                                    true};
  switch (format) {
    case ChatTemplate::Format::kGemma:
      return kGemma;
    case ChatTemplate::Format::kLlama3:
      return kLlama3;
    case ChatTemplate::Format::kChatML:
      break;
  }
  return kChatML;
}
constexpr std::string_view kFix =
    "set model.chat_template in the pipeline YAML or model.chat: false";

// The text of the first literal system turn in `text`, if any. Only plain
// text counts: a quote, brace or backslash before "<|im_end|>" means the turn
// is built from Jinja expressions (e.g. the caller's system message), which
// is not a default.
std::optional<std::string> literal_system_turn(std::string_view text) {
  const std::string opener = std::string(kStart) + "system";
  for (size_t at = text.find(opener); at != std::string_view::npos;
       at = text.find(opener, at + 1)) {
    std::string_view rest = text.substr(at + opener.size());
    // A newline inside a template string is either the character itself or
    // the two-character escape, depending on how the template was stored.
    if (rest.starts_with("\n")) {
      rest.remove_prefix(1);
    } else if (rest.starts_with("\\n")) {
      rest.remove_prefix(2);
    } else {
      continue;
    }
    const size_t end = rest.find(kEnd);
    if (end == std::string_view::npos) continue;
    std::string_view content = rest.substr(0, end);
    if (content.find_first_of("'\"{}\\") == std::string_view::npos) return std::string(content);
  }
  return std::nullopt;
}

bool contains(std::string_view text, std::string_view a, std::string_view b) {
  return text.find(a) != std::string_view::npos && text.find(b) != std::string_view::npos;
}

}  // namespace

ChatTemplate ChatTemplate::from_model(const GgufFile& file, const std::string& override_template) {
  if (override_template == "chatml") return chatml();
  if (override_template == "gemma") return gemma();
  if (override_template == "llama3") return ChatTemplate(Format::kLlama3, std::nullopt, "builtin");
  if (!override_template.empty()) return from_text(override_template, "model.chat_template");
  if (std::optional<std::string_view> text = file.find_string("tokenizer.chat_template")) {
    return from_text(*text, file.path().string() + ": model's chat template");
  }
  if (file.find("tokenizer.ggml.tokens") != nullptr) {
    const std::vector<std::string_view> tokens = file.get_string_array("tokenizer.ggml.tokens");
    auto has = [&](std::string_view t) {
      return std::find(tokens.begin(), tokens.end(), t) != tokens.end();
    };
    const std::string fallback =
        "fallback: the file has no tokenizer.chat_template; its vocabulary has ";
    if (has(kGemmaStart) && has(kGemmaEnd)) {
      return ChatTemplate(Format::kGemma, std::nullopt, fallback + std::string(kGemmaStart));
    }
    if (has(kStart) && has(kEnd)) {
      return ChatTemplate(Format::kChatML, std::nullopt, fallback + std::string(kStart));
    }
    if (has(kHeaderStart) && has(kEot)) {
      return ChatTemplate(Format::kLlama3, std::nullopt, fallback + std::string(kHeaderStart));
    }
  }
  throw Error(ErrorKind::kConfig,
              file.path().string() +
                  ": model has no chat template (tokenizer.chat_template) and its vocabulary has "
                  "none of <|im_start|>, <start_of_turn> and <|start_header_id|>; " +
                  std::string(kFix) +
                  " (model.chat_template: chatml, gemma or llama3 names a builtin format)");
}

ChatTemplate ChatTemplate::from_text(std::string_view text, std::string_view origin) {
  if (contains(text, kStart, kEnd)) {
    return ChatTemplate(Format::kChatML, literal_system_turn(text), std::string(origin));
  }
  if (contains(text, kGemmaStart, kGemmaEnd)) {
    return ChatTemplate(Format::kGemma, std::nullopt, std::string(origin));
  }
  if (contains(text, kHeaderStart, kEot) && text.find(kHeaderEnd) != std::string_view::npos) {
    return ChatTemplate(Format::kLlama3, std::nullopt, std::string(origin));
  }
  throw Error(ErrorKind::kConfig, std::string(origin) +
                                      " is not a ChatML, Gemma or Llama 3 template (Duet does not "
                                      "run Jinja yet); " +
                                      std::string(kFix));
}

std::string_view ChatTemplate::name() const {
  switch (format_) {
    case Format::kGemma:
      return "gemma";
    case Format::kLlama3:
      return "llama3";
    case Format::kChatML:
      break;
  }
  return "chatml";
}

void ChatTemplate::append_turn(std::string& out, std::string_view role,
                               std::string_view content) const {
  const Spelling& w = spelling(format_);
  out.append(w.open)
      .append(role)
      .append(w.after_role)
      .append(content)
      .append(w.close)
      .append(w.separator);
}

std::string ChatTemplate::apply(std::optional<std::string_view> system,
                                std::string_view user) const {
  const Spelling& w = spelling(format_);
  if (!system && default_system_) system = *default_system_;
  std::string out;
  if (system && !w.system_turn) {
    append_turn(out, "user", std::string(*system) + "\n\n" + std::string(user));
  } else {
    if (system) append_turn(out, "system", *system);
    append_turn(out, "user", user);
  }
  out.append(w.open).append(w.assistant).append(w.after_role);
  return out;
}

std::string ChatTemplate::apply_next(std::string_view user, bool answer_closed) const {
  const Spelling& w = spelling(format_);
  std::string out =
      answer_closed ? std::string(w.separator) : std::string(w.close) + std::string(w.separator);
  append_turn(out, "user", user);
  out.append(w.open).append(w.assistant).append(w.after_role);
  return out;
}

}  // namespace duet
