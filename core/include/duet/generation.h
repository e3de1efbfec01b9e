// duet/generation.h — what a generation reports: how it ended, where its
// text goes as it is produced, and its statistics.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "duet/export.h"

namespace duet {

enum class FinishReason {
  kNone,       // still running, or a scoring pipeline's (prefill alone) request
  kStop,       // an end-of-generation token or a stop string
  kLength,     // max_new_tokens reached, or the KV cache is full
  kCancelled,  // the caller ended it (Scheduler::cancel)
  kFailed,     // its sampler chain threw (Scheduler: RequestResult::error says why)
};

// "none", "stop", "length", "cancelled", "failed".
DUET_API const char* finish_reason_name(FinishReason reason);

// Where generated text goes, piece by piece, as it is produced. Text is
// sent as soon as it can no longer be the start of a stop string, and never
// splits a UTF-8 character.
class DUET_API TextSink {
 public:
  virtual ~TextSink() = default;
  virtual void on_text(std::string_view text) = 0;
};

// Drops the text: for measurements, scoring and tests.
class DUET_API NullSink final : public TextSink {
 public:
  void on_text(std::string_view) override {}
};

// One run's figures (RunResult::stats).
struct DUET_API RunStats {
  int32_t prompt_tokens = 0;  // the prompt positions it ran (not those found cached)
  int32_t generated_tokens = 0;
  double prefill_seconds = 0.0;      // from its first forward pass to the end of its prompt's last
  double decode_seconds = 0.0;       // from the first generated token to the last
  double first_token_seconds = 0.0;  // from the start of the run to the first generated token
  // Forward passes it ran after the one its first token came from:
  // generated - 1 for one token per pass, fewer when a pass verified
  // several (a drafting decode stage).
  int32_t decode_passes = 0;
  // With stages on two backends (`backends:` in the pipeline YAML): times
  // its KV blocks moved to the other backend's cache, their bytes as the
  // sender exported them, and the time export, conversion and import took.
  int32_t handovers = 0;
  uint64_t handover_bytes = 0;
  double handover_seconds = 0.0;

  double prefill_tokens_per_second() const {
    return prefill_seconds > 0 ? prompt_tokens / prefill_seconds : 0.0;
  }
  // Decoded tokens per second: the generated_tokens - 1 tokens that follow
  // the first token, whose cost belongs to the prefill.
  double decode_tokens_per_second() const {
    return generated_tokens > 1 && decode_seconds > 0 ? (generated_tokens - 1) / decode_seconds
                                                      : 0.0;
  }
  // Tokens per decode forward pass: 1 for the plain decode loop.
  double tokens_per_decode_pass() const {
    return decode_passes > 0 ? double(generated_tokens - 1) / decode_passes : 0.0;
  }
};

// Throws duet::Error(kConfig) naming `path` (e.g. "stages[1].decode.stop")
// for an empty stop string (it would stop at once) or one that is not valid
// UTF-8 text (text is streamed a whole character at a time).
DUET_API void check_stop_strings(const std::vector<std::string>& stop, const std::string& path);

}  // namespace duet
