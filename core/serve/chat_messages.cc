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
                  "assistant messages alternating, ending with a user message");
}

}  // namespace

std::vector<int32_t> tokenize_messages(const Tokenizer& tokenizer, const ChatTemplate& chat,
                                       const std::optional<std::string>& default_system,
                                       std::span<const ChatMessage> messages) {
  if (messages.empty()) {
    throw Error(ErrorKind::kInputRejected, "messages is empty; give at least one user message");
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    if (role != "system" && role != "user" && role != "assistant") {
      reject(i, "role '" + role + "' is not one of system, user, assistant");
    }
  }
  const bool has_system = messages.front().role == "system";
  const size_t first_user = has_system ? 1 : 0;
  if (first_user >= messages.size()) reject(0, "a system message alone has nothing to answer");
  for (size_t i = first_user; i < messages.size(); ++i) {
    const char* expected = (i - first_user) % 2 == 0 ? "user" : "assistant";
    if (messages[i].role != expected) {
      reject(i, "role '" + messages[i].role + "' where '" + expected + "' was expected");
    }
  }
  if (messages.back().role != "user") {
    reject(messages.size() - 1,
           "the last message is the assistant's, so there is nothing to answer");
  }

  // Each message's content stands in as its marker until the text is encoded.
  std::vector<std::string> markers;
  std::vector<ChatTemplate::Turn> turns;
  if (!has_system && default_system) turns.push_back({"system", *default_system});
  for (size_t i = 0; i < messages.size(); ++i) markers.push_back(marker(i));
  for (size_t i = 0; i < messages.size(); ++i) turns.push_back({messages[i].role, markers[i]});
  const std::string wrapped = chat.apply_conversation(turns);

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
