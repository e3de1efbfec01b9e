#include "chat_messages.h"

#include <nlohmann/json.hpp>
#include <random>
#include <string_view>

#include "duet/error.h"

namespace duet::serve {
namespace {

// A message's content stands in the template's text as a marker,
// "\x01duet-NONCE-I\x01", so that it is encoded apart, without parsing
// control tokens. NONCE is random per conversation: text from the request
// that the template writes itself (a tool call's name, a tool_call_id) cannot
// forge one. A template that writes a content through `tojson` (Llama 3.x's
// tool results) writes the marker JSON-escaped, "\u0001duet-NONCE-I\u0001";
// the content then goes in JSON-escaped too.
class Markers {
 public:
  Markers() {
    thread_local std::mt19937_64 random{std::random_device{}()};
    static constexpr char kHex[] = "0123456789abcdef";
    for (int i = 0; i < 16; ++i) nonce_ += kHex[random() % 16];
  }
  std::string of(size_t i) const {
    return "\x01"
           "duet-" +
           nonce_ + "-" + std::to_string(i) + "\x01";
  }

  // Encodes `text`: template text with control tokens parsed, each marker
  // as its message's content (JSON-escaped where the marker was), without.
  std::vector<int32_t> encode(const Tokenizer& tokenizer, std::string_view text,
                              std::span<const ChatMessage> messages) const {
    const std::string plain =
        "\x01"
        "duet-" +
        nonce_ + "-";
    const std::string escaped = "\\u0001duet-" + nonce_ + "-";
    std::vector<int32_t> ids;
    const auto append = [&ids](const std::vector<int32_t>& more) {
      ids.insert(ids.end(), more.begin(), more.end());
    };
    size_t at = 0;    // encoded up to here
    size_t from = 0;  // searched from here
    while (true) {
      const size_t p = text.find(plain, from);
      const size_t e = text.find(escaped, from);
      const size_t found = std::min(p, e);
      if (found == std::string_view::npos) break;
      const bool json = e < p;
      const size_t digits = found + (json ? escaped : plain).size();
      size_t end = digits;
      while (end < text.size() && text[end] >= '0' && text[end] <= '9') ++end;
      const std::string_view close = json ? std::string_view("\\u0001") : std::string_view("\x01");
      const bool whole =
          end > digits && end - digits <= 9 && text.substr(end, close.size()) == close;
      const size_t index = whole ? std::stoul(std::string(text.substr(digits, end - digits))) : 0;
      if (!whole || index >= messages.size()) {  // not a marker of ours: template text
        from = found + 1;
        continue;
      }
      append(tokenizer.encode(text.substr(at, found - at), true));
      const std::string& content = messages[index].content;
      if (json) {
        const std::string quoted =
            nlohmann::json(content).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
        append(tokenizer.encode(std::string_view(quoted).substr(1, quoted.size() - 2), false));
      } else {
        append(tokenizer.encode(content, false));
      }
      at = end + close.size();
      from = at;
    }
    append(tokenizer.encode(text.substr(at), true));
    return ids;
  }

 private:
  std::string nonce_;
};

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
void check_order(std::span<const ChatMessage> messages, const ChatTemplate& chat) {
  if (messages.empty()) {
    throw Error(ErrorKind::kInputRejected, "messages is empty; give at least one user message");
  }
  const bool takes_tools = chat.tool_syntax() != ChatTemplate::ToolSyntax::kNone;
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
  // assistant's tool calls their results; after results more of them, the
  // assistant's next message or a user's; after an assistant's answer a
  // user message.
  std::string expected = "user";
  for (size_t i = first_user; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    const bool ok =
        m.role == expected || (expected == "tool, assistant or user" &&
                               (m.role == "tool" || m.role == "assistant" || m.role == "user"));
    if (!ok) reject(i, "role '" + m.role + "' where '" + expected + "' was expected");
    if (m.role == "user") {
      expected = "assistant";
    } else if (m.role == "assistant") {
      expected = m.tool_calls.empty() ? "user" : "tool";
    } else if (m.role == "tool") {
      expected = "tool, assistant or user";
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
  check_order(messages, chat);
  const bool has_system = messages.front().role == "system";

  const Markers markers;
  std::vector<std::string> marked;
  std::vector<ChatTemplate::Turn> turns;
  if (!has_system && default_system) turns.push_back({"system", *default_system});
  // An empty content stays empty: a template may test it ("if
  // message.content").
  for (size_t i = 0; i < messages.size(); ++i)
    marked.push_back(messages[i].content.empty() ? "" : markers.of(i));
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    turns.push_back({m.role, marked[i], m.tool_calls, m.tool_call_id, m.name});
  }
  const std::string wrapped = chat.apply_conversation(turns, tools);

  std::vector<int32_t> ids;
  if (tokenizer.add_bos() && tokenizer.bos_id()) ids.push_back(*tokenizer.bos_id());
  const std::vector<int32_t> more = markers.encode(tokenizer, wrapped, messages);
  ids.insert(ids.end(), more.begin(), more.end());
  return ids;
}

}  // namespace duet::serve
