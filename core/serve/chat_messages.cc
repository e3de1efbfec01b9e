#include "chat_messages.h"

#include <string_view>

#include "duet/error.h"

namespace duet::serve {
namespace {

// Stands for message `i`'s content in the template's text; no message
// contains the \x01 bytes, and the template never writes them.
std::string marker(size_t i) {
  return "\x01"
         "duet-message-" +
         std::to_string(i) + "\x01";
}

[[noreturn]] void reject(size_t i, const std::string& what) {
  throw Error(ErrorKind::kInputRejected,
              "messages[" + std::to_string(i) + "]: " + what +
                  "; the chat template takes an optional system message, then user and "
                  "assistant messages alternating, ending with a user message (an assistant "
                  "message with tool_calls is followed by the tool messages that answer them)");
}

// "the chat template (builtin chatml)" for the errors about tools.
std::string template_named(const ChatTemplate& chat) {
  return "the model's chat template (" + std::string(chat.name()) + ", " + chat.origin() + ")";
}

// Checks the order of roles (tokenize_messages' contract).
void check_order(std::span<const ChatMessage> messages, const ChatTemplate& chat, bool tools) {
  if (messages.empty()) {
    throw Error(ErrorKind::kInputRejected, "messages is empty; give at least one user message");
  }
  const bool takes_tools = chat.tool_syntax() != ChatTemplate::ToolSyntax::kNone;
  if (tools && !takes_tools) {
    throw Error(ErrorKind::kInputRejected,
                "tools: " + template_named(chat) +
                    " cannot take tools (docs/serve.md, \"Tools\"); set model.chat_template to "
                    "a Jinja template that writes no tools (Duet then lists them) or writes "
                    "<tool_call> blocks, or leave tools out");
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role != "system" && m.role != "user" && m.role != "assistant" && m.role != "tool") {
      reject(i, "role '" + m.role + "' is not one of system, user, assistant, tool");
    }
    if ((m.role == "tool" || !m.tool_calls.empty()) && !takes_tools) {
      throw Error(ErrorKind::kInputRejected,
                  "messages[" + std::to_string(i) + "]: " + template_named(chat) +
                      " cannot write tool calls or their results; set model.chat_template to a "
                      "Jinja template (docs/serve.md, \"Tools\")");
    }
  }
  const bool has_system = messages.front().role == "system";
  const size_t first_user = has_system ? 1 : 0;
  if (first_user >= messages.size()) reject(0, "a system message alone has nothing to answer");
  // What may come next: after a user message an assistant one; after an
  // assistant's tool calls their results; after results more of them or
  // the assistant's next message; after an assistant's answer a user message.
  std::string expected = "user";
  for (size_t i = first_user; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    const bool ok = m.role == expected || (expected == "tool or assistant" &&
                                           (m.role == "tool" || m.role == "assistant"));
    if (!ok) reject(i, "role '" + m.role + "' where '" + expected + "' was expected");
    if (m.role == "user") {
      expected = "assistant";
    } else if (m.role == "assistant") {
      expected = m.tool_calls.empty() ? "user" : "tool";
    } else if (m.role == "tool") {
      expected = "tool or assistant";
    }
  }
  if (expected == "user") {
    reject(messages.size() - 1,
           "the last message is the assistant's, so there is nothing to answer");
  }
  if (expected == "tool") {
    reject(messages.size() - 1, "the assistant's tool calls have no tool message answering them");
  }
}

}  // namespace

std::vector<int32_t> tokenize_messages(const Tokenizer& tokenizer, const ChatTemplate& chat,
                                       const std::optional<std::string>& default_system,
                                       std::span<const ChatMessage> messages,
                                       std::string_view tools) {
  check_order(messages, chat, !tools.empty());
  const bool has_system = messages.front().role == "system";

  // Each message's content stands in as its marker until the text is encoded.
  std::vector<std::string> markers;
  std::vector<ChatTemplate::Turn> turns;
  if (!has_system && default_system) turns.push_back({"system", *default_system});
  // An empty content stays empty: a template may test it ("if
  // message.content").
  for (size_t i = 0; i < messages.size(); ++i)
    markers.push_back(messages[i].content.empty() ? "" : marker(i));
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    turns.push_back({m.role, markers[i], m.tool_calls, m.tool_call_id, m.name});
  }
  const std::string wrapped = chat.apply_conversation(turns, tools);

  std::vector<int32_t> ids;
  if (tokenizer.add_bos() && tokenizer.bos_id()) ids.push_back(*tokenizer.bos_id());
  const auto append = [&ids](const std::vector<int32_t>& more) {
    ids.insert(ids.end(), more.begin(), more.end());
  };
  // Template text between the markers may hold control tokens; contents not.
  const std::string_view text = wrapped;
  constexpr std::string_view kStart =
      "\x01"
      "duet-message-";
  size_t at = 0;
  while (true) {
    const size_t found = text.find(kStart, at);
    append(tokenizer.encode(text.substr(at, found == std::string_view::npos ? found : found - at),
                            true));
    if (found == std::string_view::npos) break;
    const size_t digits = found + kStart.size();
    const size_t end = text.find('\x01', digits);
    const size_t index = std::stoul(std::string(text.substr(digits, end - digits)));
    append(tokenizer.encode(messages[index].content, false));
    at = end + 1;
  }
  return ids;
}

}  // namespace duet::serve
