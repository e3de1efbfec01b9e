#include "duet/app/chat_template.h"

#include "duet/app/gguf.h"
#include "duet/error.h"

namespace duet {
namespace {

constexpr std::string_view kStart = "<|im_start|>";
constexpr std::string_view kEnd = "<|im_end|>";
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

void append_turn(std::string& out, std::string_view role, std::string_view content) {
  out.append(kStart).append(role).append("\n").append(content).append(kEnd).append("\n");
}

}  // namespace

ChatTemplate ChatTemplate::from_model(const GgufFile& file, const std::string& override_template) {
  if (override_template == "chatml") return chatml();
  if (!override_template.empty()) return from_text(override_template, "model.chat_template");
  std::optional<std::string_view> text = file.find_string("tokenizer.chat_template");
  if (!text) {
    throw Error(ErrorKind::kConfig, file.path().string() +
                                        ": model has no chat template (tokenizer.chat_template); " +
                                        std::string(kFix) +
                                        " (model.chat_template: chatml names "
                                        "the builtin ChatML template)");
  }
  return from_text(*text, file.path().string() + ": model's chat template");
}

ChatTemplate ChatTemplate::from_text(std::string_view text, std::string_view origin) {
  if (text.find(kStart) == std::string_view::npos || text.find(kEnd) == std::string_view::npos) {
    throw Error(ErrorKind::kConfig,
                std::string(origin) + " is not a ChatML template; " + std::string(kFix));
  }
  return ChatTemplate(literal_system_turn(text));
}

std::string ChatTemplate::apply(std::optional<std::string_view> system,
                                std::string_view user) const {
  std::string out;
  if (system) {
    append_turn(out, "system", *system);
  } else if (default_system_) {
    append_turn(out, "system", *default_system_);
  }
  append_turn(out, "user", user);
  out.append(kStart).append("assistant\n");
  return out;
}

std::string ChatTemplate::apply_next(std::string_view user, bool answer_closed) const {
  std::string out = answer_closed ? "\n" : std::string(kEnd) + "\n";
  append_turn(out, "user", user);
  out.append(kStart).append("assistant\n");
  return out;
}

}  // namespace duet
