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
  }
  throw Error(ErrorKind::kConfig,
              file.path().string() +
                  ": model has no chat template (tokenizer.chat_template) and its vocabulary has "
                  "neither <|im_start|> nor <start_of_turn>; " +
                  std::string(kFix) +
                  " (model.chat_template: chatml or gemma names a builtin format)");
}

ChatTemplate ChatTemplate::from_text(std::string_view text, std::string_view origin) {
  if (contains(text, kStart, kEnd)) {
    return ChatTemplate(Format::kChatML, literal_system_turn(text), std::string(origin));
  }
  if (contains(text, kGemmaStart, kGemmaEnd)) {
    return ChatTemplate(Format::kGemma, std::nullopt, std::string(origin));
  }
  throw Error(ErrorKind::kConfig, std::string(origin) +
                                      " is neither a ChatML nor a Gemma template (Duet does not "
                                      "run Jinja yet); " +
                                      std::string(kFix));
}

std::string_view ChatTemplate::name() const {
  return format_ == Format::kGemma ? "gemma" : "chatml";
}

void ChatTemplate::append_turn(std::string& out, std::string_view role,
                               std::string_view content) const {
  if (format_ == Format::kGemma) {
    out.append(kGemmaStart).append(role).append("\n").append(content).append(kGemmaEnd);
  } else {
    out.append(kStart).append(role).append("\n").append(content).append(kEnd);
  }
  out.append("\n");
}

std::string ChatTemplate::apply(std::optional<std::string_view> system,
                                std::string_view user) const {
  if (!system && default_system_) system = *default_system_;
  std::string out;
  if (format_ == Format::kGemma) {
    // No system role: the message heads the first user turn.
    const std::string first =
        system ? std::string(*system) + "\n\n" + std::string(user) : std::string(user);
    append_turn(out, "user", first);
    out.append(kGemmaStart).append("model\n");
    return out;
  }
  if (system) append_turn(out, "system", *system);
  append_turn(out, "user", user);
  out.append(kStart).append("assistant\n");
  return out;
}

std::string ChatTemplate::apply_next(std::string_view user, bool answer_closed) const {
  const std::string_view end = format_ == Format::kGemma ? kGemmaEnd : kEnd;
  std::string out = answer_closed ? "\n" : std::string(end) + "\n";
  append_turn(out, "user", user);
  out.append(format_ == Format::kGemma ? kGemmaStart : kStart)
      .append(format_ == Format::kGemma ? "model\n" : "assistant\n");
  return out;
}

}  // namespace duet
