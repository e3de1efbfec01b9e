#include "duet/app/conversation.h"

#include "duet/error.h"
#include "duet/tokenizer.h"

namespace duet {

Conversation::Conversation(Pipeline& pipeline, TextSink& sink)
    : pipeline_(pipeline), recorder_(sink) {}
Conversation::~Conversation() = default;

std::span<const int32_t> Conversation::tokens() const {
  return session_ ? session_->tokens() : std::span<const int32_t>();
}
int32_t Conversation::cached_tokens() const { return session_ ? session_->cached() : 0; }
int64_t Conversation::capacity_tokens() const { return pipeline_.check().kv_cache.capacity_tokens; }
bool Conversation::full() const { return session_ && session_->room() < 1; }

void Conversation::reset() {
  session_.reset();
  turns_ = 0;
}

RunResult Conversation::say(const std::string& message) {
  std::vector<int32_t> turn;
  int64_t pending = 0;  // tokens this turn will prefill
  if (!session_) {
    turn = pipeline_.tokenize_prompt(message);
    pending = static_cast<int64_t>(turn.size());
  } else {
    const auto held = session_->tokens();
    const bool answer_closed =
        !held.empty() && session_->tokenizer().is_end_of_generation(held.back());
    turn = pipeline_.tokenize_next_turn(message, answer_closed);
    pending =
        static_cast<int64_t>(held.size()) - session_->cached() + static_cast<int64_t>(turn.size());
  }
  const int64_t room = capacity_tokens() - cached_tokens();
  // The answer needs at least one position after the prompt.
  if (pending + 1 > room) {
    throw ConversationFull(
        ErrorKind::kInputRejected,
        "this message needs " + std::to_string(pending) + " tokens of KV cache but " +
            std::to_string(room) + " of " + std::to_string(capacity_tokens()) +
            " are free (the conversation holds " + std::to_string(cached_tokens()) +
            "); start a new conversation, or raise components.kv_cache.capacity_tokens");
  }
  if (!session_) {
    session_ = pipeline_.new_session(turn, recorder_);
  } else {
    session_->continue_with(turn);
  }
  recorder_.text().clear();
  RunResult r = pipeline_.run_stages(*session_);
  r.text = std::move(recorder_.text());
  ++turns_;
  return r;
}

}  // namespace duet
