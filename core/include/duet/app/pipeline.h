// duet/app/pipeline.h — a pipeline YAML made runnable: model weights bound on
// the backend, KV cache allocated, sampler chain and stages created.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "duet/app/pipeline_check.h"
#include "duet/app/pipeline_config.h"
#include "duet/app/plugin_host.h"
#include "duet/export.h"
#include "duet/generation.h"
#include "duet/session.h"
#include "duet/tokenizer.h"

namespace duet {

struct DUET_API RunResult {
  std::vector<int32_t> prompt_tokens;
  std::vector<int32_t> generated_tokens;  // end-of-generation token included
  std::string text;                       // what the sink received
  FinishReason finish = FinishReason::kNone;
  RunStats stats;
  std::vector<float> prompt_logits;  // [prompt, n_vocab] with prefill all_logits
};

// Thread-safety: none. A pipeline runs one forward pass at a time, for its
// own engine(), for other Schedulers made on it (duet/app/scheduler.h) and
// for sessions driven by hand. Each backend its stages run on
// (PipelineCheck::placements) has its own KV cache; one allocator hands out
// the cache blocks of every request and session, and a sequence's blocks
// move between caches when it runs on another backend.
class Scheduler;
struct RequestResult;

// The RunResult of `r`, a request of a pipeline's engine(): its prompt is
// the part it ran (from r.cached_prompt_tokens on), its stats its timings.
DUET_API RunResult run_result(RequestResult&& r);

class DUET_API Pipeline {
 public:
  // Checks `config` (check_pipeline), then loads the model onto the backend,
  // allocates the KV cache and creates the sampler links and stages. Throws
  // duet::Error: every check_pipeline() problem, kModelFile for a model the
  // architecture cannot use, kOutOfMemory when the device lacks room.
  static std::unique_ptr<Pipeline> build(const PipelineConfig& config, const PluginHost& host);
  ~Pipeline();

  // The token ids of `prompt`: wrapped in the chat template when the
  // pipeline has model.chat, with the model's BOS when it asks for one.
  // The prompt's own text is never parsed for control tokens, except in a
  // raw prompt (no model.chat) when `parse_special` says so. Throws
  // duet::Error(kInputRejected) for an empty prompt, kUsage for
  // `parse_special` with model.chat, and kConfig for a chat template that
  // cannot be applied.
  std::vector<int32_t> tokenize_prompt(const std::string& prompt, bool parse_special = false) const;

  // The token ids of a later message of a conversation (Conversation,
  // duet/app/conversation.h): with model.chat, the end of the answer before it (closed
  // by the model itself or not: `answer_closed`), the user turn and the
  // generation prompt; without, the message's text alone. The message is
  // never parsed for control tokens. Throws duet::Error(kInputRejected) for
  // an empty message.
  std::vector<int32_t> tokenize_next_turn(const std::string& message, bool answer_closed) const;

  // Runs `prompt` through the pipeline as one request of engine():
  // prefilled, then answered by the decode stage, streaming generated text
  // to `sink`; with prefill all_logits the result keeps every prompt
  // position's logits.
  RunResult run(const std::string& prompt, TextSink& sink);

  // The same for prompt token ids. Throws duet::Error(kInputRejected) for an
  // empty prompt, an id outside [0, n_vocab) or a prompt that leaves the KV
  // cache no position for the first generated token (one as long as the
  // cache, for a scoring pipeline: prefill alone), and the error of a
  // sampler or stage that failed.
  RunResult run_tokens(std::span<const int32_t> prompt, TextSink& sink);

  // The scheduler that runs this pipeline's own requests — run_tokens' and
  // Conversation's turns — one at a time: made on first use with
  // max_sequences 1, no prefix cache (a run computes its whole prompt, as
  // when it ran alone), no draft_rows bound, and a step as large as the
  // prefill stage's chunk_tokens (the whole cache when that is 0): the
  // batching section does not apply. Throws what Scheduler's constructor
  // throws.
  Scheduler& engine();

  // A session holding `prompt`, with nothing cached yet, on the backend of
  // the first stage, for driving forward passes by hand (duet/session.h:
  // measurements, tests). Several may be open at once; each holds its cache
  // blocks until it is destroyed. Throws duet::Error(kInputRejected) for an
  // empty prompt or an id outside [0, n_vocab).
  std::unique_ptr<Session> new_session(std::span<const int32_t> prompt);

  // Places `session` on the backend stage `stage` runs on, moving its cache
  // blocks when that is another backend: for driving a split pipeline by
  // hand (duet bench's decode test runs on the last stage's backend).
  // REQUIRES: stage < check().stages.size().
  void move_to_stage(Session& session, size_t stage);

  const PipelineCheck& check() const;
  const Tokenizer& tokenizer() const;
  // The sampler chain in the order it applies, e.g. "top_k -> temperature".
  std::string sampler_order() const;
  // Bytes of every backend's KV cache.
  uint64_t kv_cache_bytes() const;
  double load_seconds() const;
  // Bytes in use on the device of the first backend not in host memory
  // (total minus free, device-wide, so including its runtime's context and
  // other processes), or nullopt when every device is host memory or that
  // one cannot tell.
  std::optional<uint64_t> device_memory_in_use() const;

 private:
  friend class Scheduler;     // runs many sequences through the pipeline's parts
  friend class Conversation;  // asks for prompt logits as run_tokens does

  // `wrapped` (chat-template text holding `marker` once) as token ids, with
  // `user` in place of the marker and not parsed for control tokens.
  std::vector<int32_t> encode_wrapped(const std::string& wrapped, std::string_view marker,
                                      std::string_view user) const;

  struct State;
  explicit Pipeline(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace duet
