// duet/session.h — the state one generation carries from stage to stage.
//
// A Session holds one sequence: its tokens (prompt, then generated), how
// many of them are in the KV cache, the logits of the last forward pass and
// the run's statistics. Stages (duet/stage.h) advance it: prefill runs the
// prompt through the model, the decode loop samples and appends tokens.
// Sessions are made by a Pipeline; a stage only uses this interface.
// Thread-safety: none; a session belongs to one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "duet/export.h"

namespace duet {

class Pipeline;
class Tokenizer;

enum class FinishReason {
  kNone,       // still running
  kStop,       // an end-of-generation token or a stop string
  kLength,     // max_new_tokens reached, or the KV cache is full
  kCancelled,  // the caller ended it (Scheduler::cancel)
  kFailed,     // its sampler chain threw (Scheduler: RequestResult::error says why)
};

// "none", "stop", "length", "cancelled", "failed".
DUET_API const char* finish_reason_name(FinishReason reason);

// Where generated text goes, piece by piece, as it is produced.
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

// Forwards text to another sink and keeps a copy.
class DUET_API RecordingSink final : public TextSink {
 public:
  explicit RecordingSink(TextSink& inner) : inner_(inner) {}
  void on_text(std::string_view text) override {
    text_ += text;
    inner_.on_text(text);
  }
  std::string& text() { return text_; }

 private:
  TextSink& inner_;
  std::string text_;
};

struct DUET_API SessionStats {
  int32_t prompt_tokens = 0;
  int32_t generated_tokens = 0;
  double prefill_seconds = 0.0;      // forward passes over the prompt
  double decode_seconds = 0.0;       // from the first generated token to the last
  double first_token_seconds = 0.0;  // from the start of the run to the first generated token
  // Forward passes a decode loop ran after the first token: generated - 1
  // for one token per pass, fewer when a pass verifies several (speculative).
  int32_t decode_passes = 0;
  // KV caches handed from one backend to another at a stage placed on
  // another backend (`backends:` in the pipeline YAML), their bytes as the
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

class DUET_API Session {
 public:
  class Impl;
  explicit Session(std::unique_ptr<Impl> impl);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Prompt tokens followed by generated ones.
  std::span<const int32_t> tokens() const;
  int32_t prompt_tokens() const;
  // Tokens whose K and V are in the cache: always the first cached() tokens.
  int32_t cached() const;
  // Positions the cache can still take for this sequence.
  int64_t room() const;
  int32_t n_vocab() const;

  // Runs tokens [cached(), cached() + n) through the model, adding their K
  // and V to the cache. logits() then holds the last row's logits, or every
  // row's when `all_logits` (row i: the logits after token cached() + i,
  // predicting the token at cached() + i + 1). REQUIRES: 0 < n <= tokens().size() - cached()
  // (else duet::Error(kPlugin): the calling stage broke its contract).
  // Throws duet::Error(kInputRejected) naming the sizes and the fix when the
  // cache has no room for n more positions.
  void forward(int32_t n, bool all_logits);

  // [rows, n_vocab] logits of the last forward(), row-major.
  std::span<const float> logits() const;

  // Logit rows a stage keeps for the caller (prefill's all_logits), handed
  // back in RunResult::prompt_logits.
  std::vector<float>& kept_logits();

  // The next token, drawn by the sampler chain from the last logits row.
  // REQUIRES: a forward() has run (else duet::Error(kPlugin)).
  int32_t sample();

  // The token the sampler chain draws from row `row` of the last forward()'s
  // logits, exactly as sample() would had that forward stopped at the row:
  // the chain sees as history the tokens up to and including the row's
  // token (tokens()[0, p + 1) for the row's position p) and the same RNG
  // counter (step p + 1 - prompt_tokens()). So a stage that verifies several
  // tokens in one forward(n, true) draws what the plain decode loop would.
  // Rows whose positions truncate() dropped are gone. REQUIRES: 0 <= row <
  // the rows left, and the row predicts a generated token (p + 1 >=
  // prompt_tokens()); else duet::Error(kPlugin).
  int32_t sample(int32_t row);

  // Appends a generated token (not yet in the cache). REQUIRES: token in
  // [0, n_vocab()) (else duet::Error(kPlugin)).
  void append(int32_t token);

  // Drops every token after the first `n` (e.g. draft tokens a verifying
  // forward rejected): tokens() keeps n, cached() becomes min(cached(), n),
  // and the cache positions from n on are no longer part of the sequence —
  // attention never reads them, cache blocks no longer needed go back to
  // the pool (room() grows), and the next forward() writes position n
  // afresh. The cache then holds exactly what a run that never saw the
  // dropped tokens would hold. Logit rows of dropped positions are dropped.
  // REQUIRES: prompt_tokens() <= n <= tokens().size() (else
  // duet::Error(kPlugin)): only generated tokens can be taken back.
  void truncate(int32_t n);

  // Starts another turn of the same sequence (a chat's next message):
  // appends `prompt` after every token the session holds and makes it the
  // turn's prompt, so that prompt_tokens() becomes tokens().size(). What is
  // cached stays cached, so the next prefill runs only the new tokens (and a
  // generated one not yet cached). Clears the finish reason, the kept logits
  // and the statistics, and restarts the clock. Throws
  // duet::Error(kInputRejected) for an empty prompt or an id outside
  // [0, n_vocab()), leaving the session as it was.
  void continue_with(std::span<const int32_t> prompt);

  const Tokenizer& tokenizer() const;
  TextSink& sink();

  FinishReason finish_reason() const;
  void finish(FinishReason reason);

  SessionStats& stats();
  // Seconds since the session started, for stats.
  double elapsed_seconds() const;

 private:
  friend class Pipeline;  // moves a session between the backends its stages run on
  std::unique_ptr<Impl> impl_;
};

}  // namespace duet
