// duet/app/conversation.h — a multi-turn chat whose history stays in the KV cache.
//
// Each message is a request of the pipeline's engine() that continues the
// sequence the turn before it held (Request::continues, RequestSettings::
// hold), so a turn prefills only its own tokens — the user's message in the
// chat template and the end of the answer before it — instead of the whole
// conversation again. The answer streams to the sink given at construction.
//
// Thread-safety: none. A Conversation holds one sequence of its pipeline,
// with its cache blocks, from the first say() to reset() or destruction;
// other conversations and requests of that pipeline may run meanwhile, one
// forward pass at a time (duet/app/pipeline.h), on one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "duet/app/pipeline.h"
#include "duet/error.h"
#include "duet/export.h"
#include "duet/generation.h"

namespace duet {

// What Conversation::say() throws when a message does not fit in the KV
// cache's free room: kind kInputRejected, the message names the sizes.
class DUET_API ConversationFull : public Error {
 public:
  using Error::Error;
};

class DUET_API Conversation {
 public:
  Conversation(Pipeline& pipeline, TextSink& sink);
  ~Conversation();
  Conversation(const Conversation&) = delete;
  Conversation& operator=(const Conversation&) = delete;

  // Answers `message`, streaming the answer to the sink; the result's text
  // is the answer, its prompt the tokens this turn prefilled (the turn's
  // own, after the last sampled token of the answer before it). Throws
  // duet::Error(kInputRejected) for an empty message, and ConversationFull
  // when the turn does not fit in the KV cache's free room; the
  // conversation is then as it was, and reset() or a larger
  // components.kv_cache.capacity_tokens is the way on. An error while the
  // turn runs (a sampler or stage that failed) ends the conversation: its
  // cache is freed, and the next say() starts a new one.
  RunResult say(const std::string& message);

  // Forgets the conversation and frees its cache; the next say() starts anew.
  void reset();

  // Messages answered since the start or the last reset().
  int32_t turns() const { return turns_; }
  // Every token of the conversation so far: each turn's prompt and answer.
  std::span<const int32_t> tokens() const;
  // Tokens of the conversation in the cache, and the cache's size.
  int32_t cached_tokens() const;
  int64_t capacity_tokens() const;
  // Whether the last answer was cut short because the cache was full.
  bool full() const;

 private:
  Pipeline& pipeline_;
  TextSink& sink_;
  uint64_t held_ = 0;            // the engine's handle of the held sequence; 0: none
  std::vector<int32_t> tokens_;  // every turn's prompt and answer
  int32_t cached_ = 0;           // of them, in the KV cache
  int32_t turns_ = 0;
};

}  // namespace duet
