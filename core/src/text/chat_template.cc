#include "duet/app/chat_template.h"

#include <algorithm>
#include <exception>
#include <minja/chat-template.hpp>

#include "duet/app/gguf.h"
#include "duet/error.h"
#include "text/token_type.h"

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
    case ChatTemplate::Format::kJinja:  // never asked: a Jinja template writes its own turns
      break;
  }
  return kChatML;
}
constexpr std::string_view kFix =
    "set model.chat_template in the pipeline YAML or model.chat: false";

// Stand for contents in a rendered conversation; no message contains the
// \x01 bytes, and no template writes them.
constexpr std::string_view kEarlierUser =
    "\x01"
    "duet-earlier-user\x01";
constexpr std::string_view kAnswer =
    "\x01"
    "duet-answer\x01";

// The text of the vocabulary's end token (tokenizer.ggml.eos_token_id), or
// "" when the file names none.
std::string eos_text(const GgufFile& file) {
  const std::optional<uint64_t> id = file.find_uint("tokenizer.ggml.eos_token_id");
  if (!id || file.find("tokenizer.ggml.tokens") == nullptr) return "";
  const std::vector<std::string_view> tokens = file.get_string_array("tokenizer.ggml.tokens");
  return *id < tokens.size() ? std::string(tokens[*id]) : "";
}

// How a model under `engine` calls tools (ChatTemplate::ToolSyntax).
ChatTemplate::ToolSyntax tool_syntax_of(const minja::chat_template& engine) {
  using Syntax = ChatTemplate::ToolSyntax;
  if (!engine.original_caps().supports_tools) return Syntax::kJson;
  const std::string& source = engine.source();
  if (source.find("<tool_call>") != std::string::npos) return Syntax::kHermes;
  // The format Llama 3.x's templates ask for, in their words.
  if (source.find(R"({"name": function name, "parameters")") != std::string::npos)
    return Syntax::kLlama3;
  return Syntax::kNone;
}

nlohmann::ordered_json message(std::string_view role, std::string_view content) {
  return {{"role", std::string(role)}, {"content", std::string(content)}};
}

}  // namespace

struct ChatTemplate::Jinja {
  minja::chat_template engine;
  std::string eos;
  std::string origin;
  ToolSyntax syntax = ToolSyntax::kNone;  // how it has tools called, read once at load

  // `messages` rendered, with the generation prompt. A template that
  // raises (roles out of order, say) is duet::Error(kInputRejected).
  std::string render(const nlohmann::ordered_json& messages,
                     const nlohmann::ordered_json& tools = nullptr) const {
    minja::chat_template_inputs in;
    in.messages = messages;
    in.tools = tools;
    in.add_generation_prompt = true;
    try {
      return engine.apply(in);
    } catch (const std::exception& e) {
      throw Error(ErrorKind::kInputRejected, origin + " refused the conversation: " + e.what());
    }
  }
};
ChatTemplate ChatTemplate::from_model(const GgufFile& file, const std::string& override_template) {
  if (override_template == "chatml") return chatml();
  if (override_template == "gemma") return gemma();
  if (override_template == "llama3") return llama3();
  if (!override_template.empty())
    return from_jinja(override_template, eos_text(file), "model.chat_template");
  if (std::optional<std::string_view> text = file.find_string("tokenizer.chat_template")) {
    return from_jinja(*text, eos_text(file), file.path().string() + ": model's chat template");
  }
  if (file.find("tokenizer.ggml.tokens") != nullptr) {
    const std::vector<std::string_view> tokens = file.get_string_array("tokenizer.ggml.tokens");
    auto has = [&](std::string_view t) {
      return std::find(tokens.begin(), tokens.end(), t) != tokens.end();
    };
    const std::string fallback =
        "fallback: the file has no tokenizer.chat_template; its vocabulary has ";
    if (has(kGemmaStart) && has(kGemmaEnd)) {
      return ChatTemplate(Format::kGemma, fallback + std::string(kGemmaStart));
    }
    if (has(kStart) && has(kEnd)) {
      return ChatTemplate(Format::kChatML, fallback + std::string(kStart));
    }
    if (has(kHeaderStart) && has(kEot)) {
      return ChatTemplate(Format::kLlama3, fallback + std::string(kHeaderStart));
    }
  }
  throw Error(ErrorKind::kConfig,
              file.path().string() +
                  ": model has no chat template (tokenizer.chat_template) and its vocabulary has "
                  "none of <|im_start|>, <start_of_turn> and <|start_header_id|>; " +
                  std::string(kFix) +
                  " (model.chat_template: chatml, gemma or llama3 names a builtin format)");
}

ChatTemplate ChatTemplate::from_jinja(std::string_view text, std::string eos_token,
                                      std::string_view origin) {
  std::shared_ptr<Jinja> jinja;
  try {
    // bos_token "": Duet adds the BOS token itself where the tokenizer asks.
    jinja = std::make_shared<Jinja>(
        Jinja{minja::chat_template(std::string(text), "", eos_token), eos_token, ""});
  } catch (const std::exception& e) {
    throw Error(ErrorKind::kConfig, std::string(origin) +
                                        " is not a Jinja template Duet can run (" + e.what() +
                                        "); " + std::string(kFix) +
                                        " (model.chat_template: chatml, gemma or llama3 names a "
                                        "builtin format)");
  }
  jinja->origin = std::string(origin);
  jinja->syntax = tool_syntax_of(jinja->engine);
  ChatTemplate t(Format::kJinja, std::string(origin));
  t.jinja_ = std::move(jinja);
  std::string probe;
  try {
    probe = t.apply(std::nullopt, kEarlierUser);
  } catch (const Error& e) {
    throw Error(ErrorKind::kConfig,
                std::string(e.what()) + " (a user message alone); " + std::string(kFix));
  }
  if (probe.find(kEarlierUser) == std::string::npos) {
    throw Error(ErrorKind::kConfig, std::string(origin) +
                                        " does not write the user's message into the prompt, so "
                                        "it is no chat template; " +
                                        std::string(kFix));
  }
  return t;
}

std::string_view ChatTemplate::name() const {
  switch (format_) {
    case Format::kGemma:
      return "gemma";
    case Format::kLlama3:
      return "llama3";
    case Format::kJinja:
      return "jinja";
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
  if (jinja_) {
    nlohmann::ordered_json messages = nlohmann::ordered_json::array();
    if (system) messages.push_back(message("system", *system));
    messages.push_back(message("user", user));
    return jinja_->render(messages);
  }
  const Spelling& w = spelling(format_);
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
  if (jinja_) {
    // What the template writes after an answer: render a conversation with
    // one, and keep what follows it.
    const std::string all = jinja_->render(nlohmann::ordered_json::array(
        {message("user", kEarlierUser), message("assistant", kAnswer), message("user", user)}));
    const size_t at = all.find(kAnswer);
    if (at == std::string::npos) {
      throw Error(ErrorKind::kConfig, jinja_->origin +
                                          " does not write an assistant's answer back into the "
                                          "conversation, so a later turn cannot follow one; " +
                                          std::string(kFix));
    }
    std::string out = all.substr(at + kAnswer.size());
    // A closed answer ended with an end token (the vocabulary's eos, or an
    // end of turn such as <end_of_turn>), which is in the cache already: the
    // template's own closing token is not written again (nor the space a
    // template may put before it, as Llama 2's ' ' + eos_token).
    if (answer_closed) {
      const std::string_view rest =
          std::string_view(out).substr(std::min(out.find_first_not_of(" \t\n"), out.size()));
      for (std::string_view end : kEndOfTurnTexts) {
        if (rest.starts_with(end)) return std::string(rest.substr(end.size()));
      }
      if (!jinja_->eos.empty() && rest.starts_with(jinja_->eos))
        return std::string(rest.substr(jinja_->eos.size()));
    }
    return out;
  }
  const Spelling& w = spelling(format_);
  std::string out =
      answer_closed ? std::string(w.separator) : std::string(w.close) + std::string(w.separator);
  append_turn(out, "user", user);
  out.append(w.open).append(w.assistant).append(w.after_role);
  return out;
}

ChatTemplate::ToolSyntax ChatTemplate::tool_syntax() const {
  return jinja_ ? jinja_->syntax : ToolSyntax::kNone;
}

std::string ChatTemplate::apply_conversation(std::span<const Turn> turns,
                                             std::string_view tools) const {
  if (jinja_) {
    using nlohmann::ordered_json;
    const bool json_syntax = tool_syntax() == ToolSyntax::kJson;
    ordered_json messages = ordered_json::array();
    bool results_open = false;  // the last message holds tool results (kJson)
    for (const Turn& t : turns) {
      if (t.role != "tool") results_open = false;
      ordered_json m = message(t.role, t.content);
      if (json_syntax && !t.tool_calls.empty()) {
        // What the model answered, in the shape it was asked for; contents
        // stay outside JSON strings (they may be markers to be encoded
        // apart, chat_messages.cc).
        ordered_json calls = ordered_json::array();
        for (const ordered_json& call : ordered_json::parse(t.tool_calls)) {
          const ordered_json& f = call.at("function");
          calls.push_back(
              {{"name", f.at("name")},
               {"arguments", ordered_json::parse(f.at("arguments").get<std::string>())}});
        }
        const std::string answer = ordered_json{{"tool_calls", calls}}.dump();
        m["content"] = t.content.empty() ? answer : std::string(t.content) + "\n" + answer;
      } else if (json_syntax && t.role == "tool") {
        // Results become one user turn (templates may insist on turns
        // alternating).
        const std::string result = "Result of tool call " + std::string(t.tool_call_id) +
                                   (t.name.empty() ? "" : " (" + std::string(t.name) + ")") +
                                   ":\n" + std::string(t.content);
        if (results_open) {
          messages.back()["content"] =
              messages.back()["content"].get<std::string>() + "\n\n" + result;
          continue;
        }
        results_open = true;
        messages.push_back(message("user", result));
        continue;
      } else {
        if (!t.tool_calls.empty()) m["tool_calls"] = ordered_json::parse(t.tool_calls);
        if (!t.tool_call_id.empty()) m["tool_call_id"] = std::string(t.tool_call_id);
        if (!t.name.empty()) m["name"] = std::string(t.name);
      }
      messages.push_back(std::move(m));
    }
    ordered_json listed;
    if (!tools.empty()) {
      listed = ordered_json::parse(tools);
      // The engine lists the tools after this (its polyfill for templates
      // without tools); duet serve reads the answer (core/serve/tool_calls.h).
      if (json_syntax) {
        messages = minja::chat_template::add_system(
            messages,
            "To call tools, answer with one JSON object {\"tool_calls\": [{\"name\": NAME, "
            "\"arguments\": {...}}]}; to answer without them, {\"response\": TEXT}.");
      }
    }
    return jinja_->render(messages, listed);
  }
  for (const Turn& t : turns) {
    if (t.role == "tool" || !t.tool_calls.empty() || !tools.empty()) {
      throw Error(ErrorKind::kInternal, "apply_conversation: the builtin " + std::string(name()) +
                                            " format takes no tools");
    }
  }
  const bool has_system = !turns.empty() && turns.front().role == "system";
  const size_t first_user = has_system ? 1 : 0;
  if (first_user >= turns.size()) {
    throw Error(ErrorKind::kInternal, "apply_conversation: no user message to answer");
  }
  std::string out =
      apply(has_system ? std::optional<std::string_view>(turns.front().content) : std::nullopt,
            turns[first_user].content);
  for (size_t i = first_user + 1; i + 1 < turns.size(); i += 2) {
    out.append(turns[i].content).append(apply_next(turns[i + 1].content, false));
  }
  return out;
}

}  // namespace duet
