// chat_messages.h — a list of chat messages (`"messages"` in a prompts file)
// as the token ids the model's chat template gives them.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "duet/app/chat_template.h"
#include "duet/tokenizer.h"

namespace duet::serve {

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

// The prompt for `messages`: an optional leading system message, then user
// and assistant turns alternating, ending with a user turn, written by the
// chat template whole (ChatTemplate::apply_conversation) and followed by the
// generation prompt;
// with the tokenizer's BOS when it asks for one. Without a system message,
// `default_system` (the pipeline's model.system) is used when set, else the
// template's own default. Contents are never parsed for control tokens.
// Throws duet::Error(kInputRejected) naming the message index for any other
// order of roles or an empty list.
std::vector<int32_t> tokenize_messages(const Tokenizer& tokenizer, const ChatTemplate& chat,
                                       const std::optional<std::string>& default_system,
                                       std::span<const ChatMessage> messages);

}  // namespace duet::serve
