// duet/app/scheduler.h — many requests through one pipeline at once
// (continuous batching).
//
// Each step() is one forward pass over rows of several sequences: the next
// token of every running sequence that is decoding, plus chunks of prompts
// still to prefill, up to batching.max_step_tokens rows (chunked prefill
// mixed with decode, as vLLM schedules it), the prompt with the fewest rows
// left first; a step that ends prompts gives the others few rows, so that a
// short request's first token is not held behind a long prompt's chunks.
// Requests join at any step, first come first served, while
// fewer than batching.max_sequences run and the KV cache has free blocks;
// a finished or cancelled request leaves at once and its blocks go back to
// the pool. When a running sequence needs a block and none is free, the
// sequence admitted last is preempted: its blocks are freed and its tokens
// (prompt and generated so far) are prefilled again when it runs next, so
// nothing fails for want of memory.
//
// With batching.prefix_caching, the blocks of a prompt stay cached after
// their request ends (until the pool needs them), and a later prompt that
// starts with the same tokens attaches them instead of prefilling them.
//
// Every request has its own sampler chain (the pipeline's links, with the
// request's options over them), seed, stop strings and limits. Its random
// numbers depend only on its seed and token index, so a seeded request
// draws the same numbers alone or in any batch; whether its logits are the
// same too depends on the backend's arithmetic (a backend's batch-invariant
// mode makes them bit-identical; see docs/batching.md).
//
// It is the only engine: `duet run` and `duet chat` are requests of the
// pipeline's own scheduler (Pipeline::engine). It runs every valid
// pipeline: core's prefill stage and a decode-loop stage (duet/stage.h:
// core's decode, lookup_decode), whose limits are every request's
// defaults; or the prefill stage alone, whose requests end once their
// prompt is in the cache, generating nothing (scoring: prompt_logits). With stages on
// two backends (`backends:`), each step is one forward pass per backend:
// prompt positions run on the prefill stage's, generated ones on the decode
// stage's, and a sequence's KV blocks move to the decode backend's cache
// when it starts decoding (only blocks that cache lacks: kv_residency.h).
// A stage's drafts are verified here: each request gets the tokens the
// plain decode loop would give it. With n sequences decoding, each may
// propose at most (batching.draft_rows - n) / n draft tokens a step.
// Thread-safety: none; one thread submits, steps and collects.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "duet/app/pipeline_config.h"
#include "duet/app/token_logprobs.h"
#include "duet/error.h"
#include "duet/export.h"
#include "duet/generation.h"

namespace duet {

class Pipeline;

// Sampler options a request sets over the pipeline's chain, by link name:
// {"top_k": {"value": "5"}, "temperature": {"value": "0.7"}}.
using SamplerOverrides = std::map<std::string, std::map<std::string, std::string>>;

struct DUET_API RequestSettings {
  std::optional<uint64_t> seed;                  // else components.sampler.seed
  std::optional<int32_t> max_new_tokens;         // else the decode stage's
  std::optional<std::vector<std::string>> stop;  // else the decode stage's
  SamplerOverrides sampler;                      // over the chain's options
  // Structured output: the options of a `grammar` link (the grammar plugin,
  // plugins/grammar/grammar_link.h) put first in the request's chain, e.g.
  // {"json_schema": "{...}"}; empty for none. Refused (kConfig) when the
  // pipeline's chain has a grammar link itself or the plugin is not loaded.
  std::map<std::string, std::string> grammar;
  // For benchmarks: an end-of-generation token does not end the request
  // (max_new_tokens and stop strings still do).
  bool ignore_end_of_generation = false;
  // Until the request has generated this many tokens (0..max_new_tokens), no
  // end-of-generation token is drawn (their logits are masked for sampling;
  // kept logits and logprobs are the model's) and no stop string ends it.
  int32_t min_new_tokens = 0;
  // Keep the logits each generated token was drawn from (RequestResult::
  // logits): for fidelity checks; n_vocab floats per token.
  bool keep_logits = false;
  // Report each generated token's log-probability and this many most
  // likely alternatives (0..kMaxTopLogprobs; see duet/app/token_logprobs.h) in
  // RequestResult::logprobs; nullopt reports none.
  std::optional<int32_t> top_logprobs;
  // Also report each prompt token after the first: its log-probability given
  // the tokens before it, with top_logprobs alternatives (0 when unset), in
  // RequestResult::prompt_logprobs — what evaluation harnesses score (an
  // OpenAI completion with echo and logprobs). Such a prompt is prefilled
  // whole: cached prefix blocks are not attached to it.
  bool prompt_logprobs = false;
  // Keep the logits of every prompt position it runs (RequestResult::
  // prompt_logits): what perplexity scores (Pipeline::run_tokens asks for
  // them when the prefill stage has all_logits). Such a prompt is
  // prefilled whole, like one with prompt_logprobs.
  bool prompt_logits = false;
  // When it finishes, keep its tokens and KV cache for a later request that
  // continues it (Request::continues) instead of freeing them, until that
  // request or release() takes them: a chat between two turns.
  bool hold = false;
};

struct DUET_API Request {
  std::string id;               // the caller's name for it, echoed in the result
  std::vector<int32_t> prompt;  // token ids (Pipeline::tokenize_prompt)
  RequestSettings settings;
  TextSink* sink = nullptr;  // receives the text as it is generated; may be null
  // The handle of a finished request that held its sequence
  // (RequestSettings::hold): this one continues that sequence — its tokens,
  // prompt and answer, come first, then `prompt`, and what of them is in the
  // KV cache stays there, so only the rest is prefilled. 0: a new sequence.
  uint64_t continues = 0;
};

struct DUET_API RequestResult {
  std::string id;
  uint64_t handle = 0;  // what submit() returned (Request::continues names it)
  std::vector<int32_t> prompt_tokens;
  std::vector<int32_t> generated_tokens;  // end-of-generation token included
  std::string text;
  // kStop, kLength, kCancelled when cancel() ended it, or kFailed when its
  // sampler chain threw a duet::Error (a plugin link's trouble, named): the
  // request ends there with `error`, and the others run on.
  FinishReason finish = FinishReason::kNone;
  std::string error;                            // kFailed: the error's message
  ErrorKind error_kind = ErrorKind::kInternal;  // kFailed: its kind
  // Prompt positions it did not run: taken from the prefix cache, or held
  // by the request it continues.
  int32_t cached_prompt_tokens = 0;
  // Positions of its sequence in the KV cache when it ended: what a request
  // continuing it (with hold) finds cached.
  int32_t cached_tokens = 0;
  int32_t preemptions = 0;  // times its blocks were taken back
  // Its KV blocks moved between the caches of a pipeline's backends
  // (`backends:`): bytes exported, and seconds to move them.
  uint64_t kv_moved_bytes = 0;
  double kv_move_seconds = 0.0;
  // Seconds from submit(): to its first forward pass, to its first
  // generated token, to its end.
  double queued_seconds = 0.0;
  double first_token_seconds = 0.0;
  double total_seconds = 0.0;
  // Seconds from its first forward pass to the end of the one that ran its
  // prompt's last position.
  double prefill_seconds = 0.0;
  // Forward passes it ran after the one its first token came from: one per
  // token, fewer when passes verified drafts.
  int32_t decode_passes = 0;
  int32_t kv_moves = 0;  // times its blocks moved (kv_moved_bytes)
  // With keep_logits: [generated_tokens.size(), n_vocab], row i the logits
  // generated token i was drawn from.
  std::vector<float> logits;
  // With top_logprobs: one entry per generated token, in order.
  std::vector<TokenLogprobs> logprobs;
  // With prompt_logprobs: entry i for prompt token i + 1 (prompt_tokens.size()
  // - 1 entries).
  std::vector<TokenLogprobs> prompt_logprobs;
  // With prompt_logits: [prompt positions it ran, n_vocab], row i the
  // logits after prompt token cached_prompt_tokens + i.
  std::vector<float> prompt_logits;
  // Its tokens after the first over the time they took (0 with fewer than 2).
  double decode_tokens_per_second() const;
};

struct DUET_API SchedulerStats {
  int64_t steps = 0;              // forward passes
  int64_t prefill_rows = 0;       // prompt (and recomputed) rows run
  int64_t decode_rows = 0;        // generated-token rows run
  int64_t generated_tokens = 0;   // tokens sampled
  int64_t prefix_hit_tokens = 0;  // prompt positions taken from the prefix cache
  int64_t preemptions = 0;
  int64_t draft_tokens = 0;           // proposed by the decode stage and run
  int64_t accepted_draft_tokens = 0;  // of those, kept
  int32_t peak_running = 0;           // most sequences in one step
  // Block moves between the caches of a pipeline's backends (`backends:`):
  // moves (a sequence's blocks, each time it runs on a backend whose cache
  // lacks some), bytes, seconds.
  int64_t kv_moves = 0;
  uint64_t kv_moved_bytes = 0;
  double kv_move_seconds = 0.0;
  int64_t peak_used_blocks = 0;
  double forward_seconds = 0.0;  // inside forward passes
};

class DUET_API Scheduler {
 public:
  // Checks that the KV cache has at least batching.max_sequences blocks
  // (every pipeline that builds has stages it can step); throws
  // duet::Error(kConfig) naming the key to change otherwise. With
  // `fit_to_blocks`, a cache of fewer blocks than that runs as many
  // sequences at once as it has blocks instead (one, for a cache of one
  // block: what the Python package does with any pipeline). The pipeline
  // must outlive the scheduler. Its other schedulers (engine() among them)
  // and hand-driven sessions share its cache blocks: what one holds,
  // another cannot use.
  explicit Scheduler(Pipeline& pipeline, bool fit_to_blocks = false);
  // The same with `batching` in place of the pipeline's batching section
  // (how Pipeline::run_tokens runs its one request).
  Scheduler(Pipeline& pipeline, const BatchingConfig& batching);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues `request` and returns its handle. Throws, leaving nothing
  // queued: duet::Error(kInputRejected) for an empty prompt, an id outside
  // the vocabulary, or a prompt plus max_new_tokens that can never fit the
  // KV cache (naming the sizes and the key to raise); kConfig for a stop
  // string or sampler option the pipeline would refuse (naming the key).
  uint64_t submit(Request request);

  // Ends the request now: its blocks are freed at once (held, with hold,
  // until release()) and its result (finish kCancelled, the tokens so far)
  // is collected like any other. Unknown or finished handles are ignored.
  void cancel(uint64_t handle);
  // Frees the tokens and cache a finished request held (RequestSettings::
  // hold). Other handles are ignored.
  void release(uint64_t handle);

  // Runs one forward pass, samples, and retires what finished. Returns
  // false, doing nothing, when no request is waiting or running.
  bool step();

  // Steps until every submitted request has finished.
  void run();
  // Submits `request` and steps until it has finished; requests already
  // queued run alongside, and their results stay for take_finished().
  // Returns its result. Throws what submit() throws; for a request that
  // ended kFailed, a duet::Error of its kind and message (its held
  // sequence, with hold, is released); when a step throws, the request is
  // cancelled and dropped, held sequence included, before the exception
  // propagates.
  RequestResult run_one(Request request);

  // Results of requests finished since the last call, in finishing order.
  std::vector<RequestResult> take_finished();

  // Tokens generated so far by a waiting or running request (a preempted
  // one keeps its count); nullopt once it finished or for an unknown handle.
  // For per-token timing: a caller compares it across step() calls.
  std::optional<int32_t> generated_tokens(uint64_t handle) const;

  // The log-probabilities of a waiting or running request's tokens so far
  // (RequestSettings::top_logprobs; empty when it asked for none, or for a
  // finished or unknown handle). Valid until the next submit, cancel or
  // step: for streaming them as they come.
  std::span<const TokenLogprobs> logprobs(uint64_t handle) const;

  size_t waiting() const;
  size_t running() const;
  const SchedulerStats& stats() const;
  // KV-cache blocks: total, held by running sequences, cached prefixes.
  int64_t total_blocks() const;
  int64_t used_blocks() const;
  int64_t cached_blocks() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace duet
