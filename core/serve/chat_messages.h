// chat_messages.h — a list of chat messages (`"messages"` in a prompts file)
// as the token ids the model's chat template gives them.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "duet/app/chat_template.h"
#include "duet/tokenizer.h"

namespace duet::serve {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant" or "tool"
  std::string content;
  std::string tool_calls;    // an assistant's: the JSON text of its tool_calls array, or ""
  std::string tool_call_id;  // a tool message's, or ""
  std::string name;          // a tool message's function, or ""
};

// The prompt for `messages`: an optional leading system message, then user
// and assistant turns alternating, ending with a user turn — an assistant
// turn with tool calls is followed by one tool message or more, then the
// assistant's next turn or the end — written by the chat template whole
// (ChatTemplate::apply_conversation, with `tools`, the JSON text of the
// request's tools array, or empty) and followed by the generation prompt;
// with the tokenizer's BOS when it asks for one. Without a system message,
// `default_system` (the pipeline's model.system) is used when set, else the
// template's own default. Message contents are never parsed for control
// tokens; tool definitions and call arguments, written by the template, are.
// Throws duet::Error(kInputRejected) naming the message index for any other
// order of roles, an empty list, or tools or tool messages on a template
// that cannot write them (ChatTemplate::ToolSyntax::kNone).
std::vector<int32_t> tokenize_messages(const Tokenizer& tokenizer, const ChatTemplate& chat,
                                       const std::optional<std::string>& default_system,
                                       std::span<const ChatMessage> messages,
                                       std::string_view tools = {});

}  // namespace duet::serve
