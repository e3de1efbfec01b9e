#include "duet/app/conversation.h"

#include "duet/app/scheduler.h"
#include "duet/error.h"
#include "duet/tokenizer.h"
#include "engine/pipeline_state.h"

namespace duet {

Conversation::Conversation(Pipeline& pipeline, TextSink& sink) : pipeline_(pipeline), sink_(sink) {}
Conversation::~Conversation() { reset(); }

std::span<const int32_t> Conversation::tokens() const { return tokens_; }
int32_t Conversation::cached_tokens() const { return cached_; }
int64_t Conversation::capacity_tokens() const { return pipeline_.check().kv_cache.capacity_tokens; }
bool Conversation::full() const { return held_ != 0 && cached_ >= capacity_tokens(); }

void Conversation::reset() {
  if (held_ != 0) pipeline_.engine().release(held_);
  held_ = 0;
  tokens_.clear();
  cached_ = 0;
  turns_ = 0;
}

RunResult Conversation::say(const std::string& message) {
  std::vector<int32_t> turn;
  int64_t pending = 0;  // tokens this turn will prefill
  if (held_ == 0) {
    turn = pipeline_.tokenize_prompt(message);
    pending = static_cast<int64_t>(turn.size());
  } else {
    const bool answer_closed =
        !tokens_.empty() && pipeline_.tokenizer().is_end_of_generation(tokens_.back());
    turn = pipeline_.tokenize_next_turn(message, answer_closed);
    pending = static_cast<int64_t>(tokens_.size()) - cached_ + static_cast<int64_t>(turn.size());
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
  Request request;
  request.prompt = std::move(turn);
  request.sink = &sink_;
  request.continues = held_;
  request.settings.hold = true;
  request.settings.prompt_logits = pipeline_.state_->prefill.all_logits;
  RequestResult done;
  try {
    done = pipeline_.engine().run_one(std::move(request));
  } catch (...) {
    // The conversation ends: a turn that ran went with its sequence
    // (Scheduler::run_one), one refused before it ran is released here.
    reset();
    throw;
  }
  held_ = done.handle;
  cached_ = done.cached_tokens;
  tokens_ = done.prompt_tokens;
  tokens_.insert(tokens_.end(), done.generated_tokens.begin(), done.generated_tokens.end());
  ++turns_;
  return run_result(std::move(done));
}

}  // namespace duet
