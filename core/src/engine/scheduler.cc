#include "duet/app/scheduler.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <limits>
#include <list>

#include "duet/app/plugin_host.h"
#include "duet/error.h"
#include "duet/generation.h"
#include "duet/stage.h"
#include "engine/pipeline_state.h"
#include "engine/session_impl.h"
#include "engine/stage_options.h"
#include "engine/step_rows.h"
#include "plugins/named_call.h"
#include "text/text_stream.h"

namespace duet {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// The prefill stage's options and the decode-loop stage, whose limits are
// every request's defaults.
struct StageDefaults {
  PrefillOptions prefill;
  const Stage* decode = nullptr;  // owned by the pipeline; null: scoring
  DecodeLimits limits;
};

// "stage 'lookup_decode' (plugin 'speculative', stages[1])": what the
// decode stage's failures are reported as.
std::string stage_label(const PipelineConfig& config, const PluginHost* host) {
  const std::string& name = config.stages.back().name;
  std::string plugin = "core";
  if (host != nullptr) {
    for (const ComponentInfo& c : host->components(ComponentKind::kStage)) {
      if (c.name == name) plugin = c.plugin;
    }
  }
  return "stage '" + name + "' (plugin '" + plugin + "', stages[" +
         std::to_string(config.stages.size() - 1) + "])";
}

// The limits of decode stage `stage` (none: a scoring pipeline), a failure
// reported as `label`'s.
DecodeLimits limits_of(const Stage* stage, const std::string& label) {
  DecodeLimits limits;
  if (stage != nullptr) call_named(label, [&] { limits = stage->limits(); });
  return limits;
}

// `batching` with max_sequences lowered to the cache's blocks, when asked
// (Scheduler's fit_to_blocks).
BatchingConfig fitted(BatchingConfig batching, const KVAllocator& allocator, bool fit_to_blocks) {
  if (fit_to_blocks && allocator.total_blocks() < batching.max_sequences)
    batching.max_sequences = static_cast<int32_t>(allocator.total_blocks());
  return batching;
}

// `batching` with prefix_caching off where the cache keeps window rings,
// which share no prefix (kv_allocator.h): nothing would attach, and a
// prompt would be held back behind another with the same start for nothing.
BatchingConfig without_prefixes_in_rings(BatchingConfig batching, const KVAllocator& allocator) {
  if (allocator.window_rings() != nullptr) batching.prefix_caching = false;
  return batching;
}

}  // namespace

double RequestResult::decode_tokens_per_second() const {
  const double span = total_seconds - first_token_seconds;
  return generated_tokens.size() > 1 && span > 0
             ? static_cast<double>(generated_tokens.size() - 1) / span
             : 0.0;
}

class DUET_LOCAL Scheduler::Impl {
 public:
  Impl(Pipeline& pipeline, const BatchingConfig& batching);
  ~Impl();

  uint64_t submit(Request request);
  void cancel(uint64_t handle);
  void release(uint64_t handle);
  bool step();

  // One request from submit() to its result.
  struct Sequence {
    uint64_t handle = 0;
    int32_t alloc_id = 0;  // its id in the pipeline's KVAllocator
    std::string id;
    TextSink* sink = nullptr;
    std::vector<int32_t> tokens;  // prompt, then generated
    int32_t prompt_tokens = 0;
    int32_t max_new_tokens = 0;
    bool ignore_end_of_generation = false;
    int32_t min_new_tokens = 0;
    bool keep_logits = false;
    std::vector<float> kept_logits;
    int32_t top_logprobs = -1;  // -1: none kept
    std::vector<TokenLogprobs> logprobs;
    bool prompt_logprobs = false;
    std::vector<TokenLogprobs> prompt_entries;  // for prompt tokens 1, 2, ...
    bool keep_prompt_logits = false;
    std::vector<float> prompt_logits;  // rows from position cached_prompt_tokens on
    bool hold = false;                 // keep tokens and cache when it ends
    bool scored = false;               // a scoring pipeline's request: its prompt is in
    std::unique_ptr<SamplerChain> chain;
    std::unique_ptr<SequenceDrafter> drafter;  // null: one token per pass
    int32_t drafted = 0;                       // draft tokens at the end of `tokens` during a step
    std::unique_ptr<TextStream> text_stream;
    std::string text;
    FinishReason finish = FinishReason::kNone;
    std::optional<Error> failure;  // kFailed: what its chain threw
    int32_t cached_prompt_tokens = 0;
    int32_t preemptions = 0;
    bool started = false;  // has run in a forward pass
    int32_t kv_moves = 0;  // its blocks moved between backends' caches
    uint64_t kv_moved_bytes = 0;
    double kv_move_seconds = 0.0;
    Clock::time_point submitted;
    double queued_seconds = 0.0;
    double first_token_seconds = 0.0;
    Clock::time_point first_forward;
    double prefill_seconds = 0.0;  // first pass to the end of its prompt's last
    int32_t sampled_passes = 0;    // passes it sampled from

    int32_t generated() const { return static_cast<int32_t>(tokens.size()) - prompt_tokens; }
  };

  Pipeline::State& state;
  KVAllocator& allocator;
  const StageDefaults defaults;
  // Where prompts are prefilled and where sequences decode: indices into
  // state.placements (the same one unless the pipeline has `backends:`).
  const size_t prefill_at;
  const size_t decode_at;
  const BatchingConfig batching;
  // What a drafter's failure is reported as (built once, not per step).
  const std::string draft_label;
  std::list<Sequence> running;  // in admission order
  std::deque<Sequence> waiting;
  std::map<uint64_t, Sequence> held;  // finished with hold, by handle
  std::vector<RequestResult> finished;
  SchedulerStats stats;
  uint64_t next_handle = 1;

  // Per step: what each scheduled sequence runs, and on which placement.
  struct Scheduled {
    Sequence* seq;
    int32_t rows;
    size_t placement;
  };
  std::vector<Scheduled> scheduled;
  // The pipeline's (null with one placement): a sequence's blocks not
  // current in the cache of the placement it runs on move there first.
  KVResidency* const residency;
  // Per forward pass with a residency: the positions it writes, recorded
  // once the pass ran.
  struct Written {
    int32_t sequence, first, end;
  };
  std::vector<Written> written;
  std::vector<KVAllocator::BlockCopy> copies;
  std::vector<int32_t> step_tokens;
  std::vector<int32_t> logit_rows;
  // Whose logits are where, and what they are for: the rows a sequence
  // samples from (`row` and, with a draft, one after it per draft token),
  // the row scoring the next token of prompt position `prompt_position`
  // (prompt_logprobs), or the row of that position kept whole
  // (prompt_logits).
  enum class LogitUse { kSample, kPromptLogprobs, kPromptLogits };
  struct LogitOwner {
    Sequence* seq;
    LogitUse use;
    int32_t prompt_position;
    int32_t row;  // into `logits`
  };
  std::vector<LogitOwner> logit_owners;
  std::vector<float> logits;
  // The vocabulary's end-of-generation tokens, masked for a sequence short
  // of its min_new_tokens (into masked_logits).
  std::vector<int32_t> end_tokens;
  std::vector<float> masked_logits;
  std::vector<int32_t> draft;

 private:
  // Whether `seq` wants every prompt position's logits, so that its prompt
  // is run whole (no cached prefix is attached).
  static bool scores_prompt(const Sequence& seq) {
    return seq.prompt_logprobs || seq.keep_prompt_logits;
  }
  // Positions of `seq` not yet in the cache: 1 while it decodes, more while
  // its prompt (or what a preemption dropped) is prefilled.
  int32_t missing_rows(const Sequence& seq) const {
    return static_cast<int32_t>(seq.tokens.size()) - allocator.length(seq.alloc_id);
  }
  // Where `seq`'s next missing position is computed: prompt positions on
  // the prefill stage's placement, generated ones (recomputed after a
  // preemption) on the decode stage's, as they were first computed.
  size_t placement_of(const Sequence& seq) const {
    return allocator.length(seq.alloc_id) < seq.prompt_tokens ? prefill_at : decode_at;
  }
  // Whether `seq`'s one missing row is its prompt's last, which runs with
  // the prompts on another placement than the decode rows: a prompt row,
  // scheduled with the prompts.
  bool prompt_row_elsewhere(const Sequence& seq) const {
    return prefill_at != decode_at && allocator.length(seq.alloc_id) < seq.prompt_tokens;
  }
  // Rows `seq` should run this step, within `budget` (and, on split
  // placements, within the part — prompt or generated — it is in).
  int32_t rows_wanted(const Sequence& seq, int32_t budget) const;
  // Gives `budget` rows to prompts: running sequences still prefilling and
  // waiting ones it admits, shortest remaining prompt first.
  void schedule_prompts(int32_t budget);
  // Whether waiting `seq` starts with the first block of a prompt this step
  // is filling: it then waits a step and attaches that block (and what else
  // is published by then) instead of computing it again — siblings of one
  // prompt (n > 1), a system prompt many requests share.
  bool shares_a_prefix_in_flight(const Sequence& seq) const;
  // Takes cache for `rows` more positions of `seq`, preempting the most
  // recently admitted running sequences while none is free — never `seq`
  // itself, and never one already scheduled in this step (it stops there).
  // Returns false when that is not enough.
  bool reserve(Sequence& seq, int32_t rows, bool may_preempt);
  // Frees `seq`'s blocks and queues it first to recompute what it had.
  void preempt(std::list<Sequence>::iterator it);
  // Appends to `seq.tokens` the draft its drafter proposes, at most
  // `rows_left` tokens (and none past its limits or the cache).
  void propose_draft(Sequence& seq, int32_t rows_left);
  // Takes `seq`'s draft tokens off its tokens again.
  void drop_draft(Sequence& seq);
  // Makes copy-on-write copies, runs each placement's scheduled sequences
  // in a forward pass of their own, and retires what finished.
  void run_step();
  // The forward pass on placement `at` of the scheduled sequences placed
  // there: moves in their blocks not current there (KVResidency), runs,
  // samples.
  void run_forward(size_t at);

  // From logits rows `row`, `row` + 1, ...: samples `seq`'s next token,
  // then, while it equals the next draft token, the one after; drops the
  // cache positions of the draft tokens not kept.
  void decode(Sequence& seq, int32_t row);
  // Samples the next token of `seq` from logits row `row`, streams it and
  // decides whether it finished. Returns the token.
  int32_t advance(Sequence& seq, int32_t row);
  // Moves `seq` to the results, ended with `reason`, and frees its blocks.
  void retire(Sequence& seq, FinishReason reason);
  void emit(Sequence& seq, const std::string& text);
};

Scheduler::Impl::Impl(Pipeline& pipeline, const BatchingConfig& batching_config)
    : state(*pipeline.state_),
      allocator(*state.allocator),
      defaults{state.prefill, state.decode.get(),
               limits_of(state.decode.get(), stage_label(state.config, state.host))},
      prefill_at(state.check.stage_placement.empty() ? 0 : state.check.stage_placement.at(0)),
      decode_at(state.check.stage_placement.size() < 2 ? prefill_at
                                                       : state.check.stage_placement.at(1)),
      batching(without_prefixes_in_rings(batching_config, allocator)),
      draft_label(stage_label(state.config, state.host)),
      residency(state.residency.get()) {
  for (int32_t id = 0; id < state.check.hparams.n_vocab; ++id) {
    if (state.tokenizer->is_end_of_generation(id)) end_tokens.push_back(id);
  }
  if (allocator.total_blocks() < batching.max_sequences) {
    // The largest block size that cuts the cache into enough blocks, when
    // there is one.
    const int64_t capacity = allocator.capacity_tokens();
    int64_t fit = std::max<int64_t>(1, capacity / batching.max_sequences);
    while (capacity % fit != 0) --fit;
    const std::string fix = capacity < batching.max_sequences
                                ? "raise components.kv_cache.capacity_tokens to at least " +
                                      std::to_string(batching.max_sequences)
                                : "set components.kv_cache.block_tokens to " + std::to_string(fit) +
                                      " or a smaller divisor of capacity_tokens";
    throw Error(ErrorKind::kConfig,
                "components.kv_cache.block_tokens " + std::to_string(allocator.block_tokens()) +
                    " cuts the " + std::to_string(allocator.capacity_tokens()) +
                    "-token cache into " + std::to_string(allocator.total_blocks()) +
                    " block(s), fewer than batching.max_sequences (" +
                    std::to_string(batching.max_sequences) +
                    "), and every running sequence needs blocks of its own; " + fix +
                    ", or lower batching.max_sequences");
  }
}

Scheduler::Impl::~Impl() {
  for (const Sequence& seq : running) allocator.release(seq.alloc_id);
  for (const Sequence& seq : waiting) allocator.release(seq.alloc_id);
  for (const auto& [handle, seq] : held) allocator.release(seq.alloc_id);
}

uint64_t Scheduler::Impl::submit(Request request) {
  const int32_t vocab = state.check.hparams.n_vocab;
  if (request.prompt.empty()) {
    throw Error(ErrorKind::kInputRejected, "request '" + request.id + "' has an empty prompt");
  }
  check_prompt_ids(request.prompt, vocab);
  const RequestSettings& settings = request.settings;
  Sequence* continued = nullptr;
  if (request.continues != 0) {
    const auto it = held.find(request.continues);
    if (it == held.end()) {
      throw Error(ErrorKind::kInputRejected,
                  "request '" + request.id + "' continues request handle " +
                      std::to_string(request.continues) +
                      ", which holds no sequence (it did not finish with hold, or was released "
                      "or continued already)");
    }
    if (settings.prompt_logprobs) {
      throw Error(ErrorKind::kInputRejected,
                  "request '" + request.id +
                      "' asks for prompt_logprobs and continues another request; score a "
                      "prompt as a new sequence");
    }
    continued = &it->second;
  }
  // A prompt that generates must leave a position for its first token; a
  // scoring pipeline's may fill the cache.
  const int64_t capacity = allocator.capacity_tokens();
  const int64_t prompt_size = static_cast<int64_t>(request.prompt.size()) +
                              (continued ? static_cast<int64_t>(continued->tokens.size()) : 0);
  const int64_t most = defaults.decode != nullptr ? capacity - 1 : capacity;
  if (prompt_size > most) {
    const std::string fix = "; raise components.kv_cache.capacity_tokens or shorten the prompt";
    const std::string why = most < capacity ? ", which must leave room for a generated token" : "";
    throw Error(ErrorKind::kInputRejected,
                request.id.empty() && prompt_size > capacity
                    ? "prompt has " + std::to_string(prompt_size) +
                          " tokens but the KV cache has room for " + std::to_string(capacity) + fix
                    : (request.id.empty() ? "the prompt has "
                                          : "request '" + request.id + "' has a prompt of ") +
                          std::to_string(prompt_size) + " tokens, and the KV cache holds " +
                          std::to_string(capacity) + " positions in all" + why + fix);
  }
  Sequence seq;
  seq.max_new_tokens = settings.max_new_tokens.value_or(defaults.limits.max_new_tokens);
  if (seq.max_new_tokens < 1 || seq.max_new_tokens > 16777216) {
    throw Error(ErrorKind::kConfig, "max_new_tokens " + std::to_string(seq.max_new_tokens) +
                                        " is outside [1, 16777216]");
  }
  std::vector<std::string> stop = settings.stop.value_or(defaults.limits.stop);
  check_stop_strings(stop, "stop");
  seq.chain = state.make_chain(settings.seed.value_or(state.config.sampler.seed), settings.sampler,
                               settings.grammar);
  if (settings.min_new_tokens < 0 || settings.min_new_tokens > seq.max_new_tokens) {
    throw Error(ErrorKind::kInputRejected,
                "min_new_tokens " + std::to_string(settings.min_new_tokens) + " is outside [0, " +
                    std::to_string(seq.max_new_tokens) + "] (max_new_tokens)");
  }
  seq.min_new_tokens = settings.min_new_tokens;
  seq.text_stream = std::make_unique<TextStream>(std::move(stop), seq.min_new_tokens == 0);
  seq.ignore_end_of_generation = settings.ignore_end_of_generation;
  seq.keep_logits = settings.keep_logits;
  if (settings.top_logprobs) {
    if (*settings.top_logprobs < 0 || *settings.top_logprobs > kMaxTopLogprobs) {
      throw Error(ErrorKind::kInputRejected,
                  "top_logprobs " + std::to_string(*settings.top_logprobs) + " is outside [0, " +
                      std::to_string(kMaxTopLogprobs) + "]");
    }
    seq.top_logprobs = *settings.top_logprobs;
  }
  seq.prompt_logprobs = settings.prompt_logprobs;
  seq.keep_prompt_logits = settings.prompt_logits;
  seq.hold = settings.hold;
  if (defaults.decode != nullptr)
    call_named(draft_label, [&] { seq.drafter = defaults.decode->start_sequence(); });
  seq.handle = next_handle++;
  seq.id = std::move(request.id);
  seq.sink = request.sink;
  if (continued != nullptr) {
    seq.alloc_id = continued->alloc_id;
    seq.tokens = std::move(continued->tokens);
    seq.tokens.insert(seq.tokens.end(), request.prompt.begin(), request.prompt.end());
    seq.cached_prompt_tokens = allocator.length(seq.alloc_id);
    held.erase(request.continues);
  } else {
    seq.alloc_id = state.next_sequence++;
    seq.tokens = std::move(request.prompt);
  }
  seq.prompt_tokens = static_cast<int32_t>(seq.tokens.size());
  seq.submitted = Clock::now();
  waiting.push_back(std::move(seq));
  return waiting.back().handle;
}

void Scheduler::Impl::cancel(uint64_t handle) {
  for (auto it = waiting.begin(); it != waiting.end(); ++it) {
    if (it->handle == handle) {
      retire(*it, FinishReason::kCancelled);
      waiting.erase(it);
      return;
    }
  }
  for (auto it = running.begin(); it != running.end(); ++it) {
    if (it->handle == handle) {
      retire(*it, FinishReason::kCancelled);
      running.erase(it);
      return;
    }
  }
}

void Scheduler::Impl::release(uint64_t handle) {
  const auto it = held.find(handle);
  if (it == held.end()) return;
  allocator.release(it->second.alloc_id);
  held.erase(it);
}

int32_t Scheduler::Impl::rows_wanted(const Sequence& seq, int32_t budget) const {
  const int32_t missing = missing_rows(seq);
  // A sequence with window rings runs at most what its ring holds a step.
  int32_t rows = std::min({missing, budget, allocator.max_step_rows()});
  if (defaults.prefill.chunk_tokens > 0 && missing > 1)
    rows = std::min(rows, defaults.prefill.chunk_tokens);
  const int32_t length = allocator.length(seq.alloc_id);
  if (prefill_at != decode_at && length < seq.prompt_tokens)
    rows = std::min(rows, seq.prompt_tokens - length);
  return rows;
}

void Scheduler::Impl::preempt(std::list<Sequence>::iterator it) {
  allocator.release(it->alloc_id);
  ++it->preemptions;
  ++stats.preemptions;
  waiting.push_front(std::move(*it));
  running.erase(it);
}

bool Scheduler::Impl::reserve(Sequence& seq, int32_t rows, bool may_preempt) {
  while (!allocator.append(seq.alloc_id, rows, copies)) {
    if (!may_preempt || running.empty() || &running.back() == &seq) return false;
    const Sequence* newest = &running.back();
    if (std::any_of(scheduled.begin(), scheduled.end(),
                    [&](const Scheduled& s) { return s.seq == newest; }))
      return false;  // it runs in this step already
    preempt(std::prev(running.end()));
  }
  return true;
}

bool Scheduler::Impl::step() {
  if (running.empty() && waiting.empty()) return false;
  scheduled.clear();
  copies.clear();
  int32_t budget = batching.max_step_tokens;
  const auto decoding = [&](const Sequence& seq) {
    return missing_rows(seq) == 1 && !prompt_row_elsewhere(seq);
  };
  // Each decoding sequence's share of batching.draft_rows beyond its own row.
  const auto n_decoding =
      static_cast<int32_t>(std::count_if(running.begin(), running.end(), decoding));
  const int32_t draft_share =
      n_decoding == 0 ? 0 : std::max(0, (batching.draft_rows - n_decoding) / n_decoding);
  // Decode rows first: one for each running sequence that is decoding.
  for (auto it = running.begin(); it != running.end() && budget > 0;) {
    Sequence& seq = *it;
    if (!decoding(seq)) {
      ++it;
      continue;
    }
    // A draft only where its blocks are free: drafts never preempt.
    try {
      propose_draft(seq, std::min({budget - 1, draft_share, allocator.max_step_rows() - 1}));
    } catch (const Error& e) {
      // Its drafter failed (named): it ends alone, as with a failing
      // sampler chain; the others run on.
      seq.failure = e;
      retire(seq, FinishReason::kFailed);
      it = running.erase(it);
      continue;
    }
    if (seq.drafted > 0 && !reserve(seq, 1 + seq.drafted, false)) drop_draft(seq);
    if (seq.drafted == 0 && !reserve(seq, 1, true)) {
      // Only the newest can fail (it preempts the others first): it waits.
      preempt(it++);
      continue;
    }
    scheduled.push_back(Scheduled{&seq, 1 + seq.drafted, decode_at});
    budget -= 1 + seq.drafted;
    ++it;
  }
  schedule_prompts(budget);
  if (scheduled.empty() && running.empty() && waiting.empty()) return true;  // all failed
  if (scheduled.empty() && running.empty() && !held.empty()) {
    // Nothing runs that could free blocks: the held sequences have them.
    throw Error(ErrorKind::kInputRejected,
                "the KV cache has no room for the next request: " + std::to_string(held.size()) +
                    " finished request(s) hold their sequences for a next turn (" +
                    std::to_string(allocator.used_blocks()) + " of " +
                    std::to_string(allocator.total_blocks()) +
                    " blocks in use); end those conversations, or raise "
                    "components.kv_cache.capacity_tokens" +
                    allocator.ring_room_hint());
  }
  if (scheduled.empty()) {
    throw Error(ErrorKind::kInternal, "the scheduler found nothing to run although " +
                                          std::to_string(running.size() + waiting.size()) +
                                          " requests are unfinished");
  }
  try {
    run_step();
  } catch (...) {
    for (const Scheduled& s : scheduled) drop_draft(*s.seq);
    throw;
  }
  return true;
}

void Scheduler::Impl::propose_draft(Sequence& seq, int32_t rows_left) {
  seq.drafted = 0;
  if (seq.drafter == nullptr) return;
  // Draft positions follow the newest token's, inside the cache; and no
  // draft token is worth running past the last token the request may get.
  const int64_t most =
      std::min<int64_t>({rows_left, seq.max_new_tokens - seq.generated() - 1,
                         allocator.capacity_tokens() - static_cast<int64_t>(seq.tokens.size())});
  if (most < 1) return;
  const std::string& stage = state.config.stages[1].name;
  draft.clear();
  call_named(draft_label,
             [&] { seq.drafter->propose(seq.tokens, static_cast<int32_t>(most), draft); });
  if (static_cast<int64_t>(draft.size()) > most) {
    throw Error(ErrorKind::kPlugin,
                "stage '" + stage + "' proposed " + std::to_string(draft.size()) +
                    " draft tokens where at most " + std::to_string(most) + " were asked for");
  }
  for (const int32_t t : draft) {
    if (t < 0 || t >= state.check.hparams.n_vocab) {
      throw Error(ErrorKind::kPlugin, "stage '" + stage + "' proposed draft token " +
                                          std::to_string(t) + ", outside the vocabulary [0, " +
                                          std::to_string(state.check.hparams.n_vocab) + ")");
    }
  }
  seq.tokens.insert(seq.tokens.end(), draft.begin(), draft.end());
  seq.drafted = static_cast<int32_t>(draft.size());
}

void Scheduler::Impl::drop_draft(Sequence& seq) {
  seq.tokens.resize(seq.tokens.size() - static_cast<size_t>(seq.drafted));
  seq.drafted = 0;
}

bool Scheduler::Impl::shares_a_prefix_in_flight(const Sequence& seq) const {
  if (!batching.prefix_caching || scores_prompt(seq) || allocator.length(seq.alloc_id) > 0)
    return false;
  const auto block = static_cast<size_t>(allocator.block_tokens());
  if (seq.tokens.size() <= block) return false;  // no whole block to share
  for (const Scheduled& s : scheduled) {
    const Sequence& other = *s.seq;
    const bool filling_first_block =
        allocator.length(other.alloc_id) - s.rows < allocator.block_tokens();
    if (filling_first_block && other.tokens.size() >= block &&
        std::equal(seq.tokens.begin(), seq.tokens.begin() + static_cast<std::ptrdiff_t>(block),
                   other.tokens.begin())) {
      return true;
    }
  }
  return false;
}

void Scheduler::Impl::schedule_prompts(int32_t budget) {
  // The candidates: running sequences still prefilling, and as many waiting
  // ones, oldest first, as there are free places. The rows go to the one
  // with the fewest prompt rows left first (ties to the older), so that a
  // short request is not held behind a long prompt's chunks; admission
  // stays first come, first served.
  struct Candidate {
    uint64_t handle;
    int32_t rows_left;
    bool waiting;
  };
  std::vector<Candidate> candidates;
  for (const Sequence& seq : running) {
    if (missing_rows(seq) > 1 || prompt_row_elsewhere(seq))
      candidates.push_back({seq.handle, missing_rows(seq), false});
  }
  const auto places = static_cast<size_t>(
      std::max<int64_t>(0, int64_t{batching.max_sequences} - static_cast<int64_t>(running.size())));
  for (size_t i = 0; i < waiting.size() && i < places; ++i) {
    const Sequence& seq = waiting[i];
    candidates.push_back({seq.handle, missing_rows(seq), true});
  }
  std::stable_sort(
      candidates.begin(), candidates.end(),
      [](const Candidate& a, const Candidate& b) { return a.rows_left < b.rows_left; });
  // A step that ends prompts (their first tokens come out of it) is kept
  // short: the prompts that do not end get rows only up to a quarter of
  // max_step_tokens in all, so that those first tokens are not held behind
  // a long prompt's chunk (which goes on at full size the step after).
  const int32_t chunk = defaults.prefill.chunk_tokens > 0 ? defaults.prefill.chunk_tokens : budget;
  int32_t ending = 0;
  for (const Candidate& c : candidates) {
    if (c.rows_left > chunk || ending + c.rows_left > budget) break;
    ending += c.rows_left;
  }
  if (ending > 0 && ending < budget)
    budget = std::min(budget, std::max(ending, batching.max_step_tokens / 4));
  for (const Candidate& c : candidates) {
    if (budget <= 0) return;
    if (!c.waiting) {
      // Looked up again: a reservation before this one may have preempted it.
      auto it = std::find_if(running.begin(), running.end(),
                             [&](const Sequence& s) { return s.handle == c.handle; });
      if (it == running.end()) continue;
      const int32_t rows = rows_wanted(*it, budget);
      const size_t at = placement_of(*it);
      if (!reserve(*it, rows, true)) {
        // Newest of all, it could take no more: it waits. Otherwise a
        // sequence running in this step held the blocks: it keeps its own
        // and goes on next step.
        if (&running.back() == &*it) preempt(it);
        continue;
      }
      scheduled.push_back(Scheduled{&*it, rows, at});
      budget -= rows;
      continue;
    }
    if (static_cast<int32_t>(running.size()) >= batching.max_sequences) continue;
    auto it = std::find_if(waiting.begin(), waiting.end(),
                           [&](const Sequence& s) { return s.handle == c.handle; });
    if (it == waiting.end()) continue;
    Sequence& seq = *it;
    if (shares_a_prefix_in_flight(seq)) continue;
    // A request continuing a held sequence already holds its blocks.
    const bool holds = allocator.length(seq.alloc_id) > 0;
    int32_t attached = 0;
    if (batching.prefix_caching && !holds && !scores_prompt(seq)) {
      attached = allocator.attach_prefix(seq.alloc_id, seq.tokens,
                                         static_cast<int32_t>(seq.tokens.size()) - 1);
    }
    int32_t rows = rows_wanted(seq, budget);
    size_t at = placement_of(seq);
    if (!reserve(seq, rows, false)) {
      // A held sequence waits, keeping its blocks, while running ones may
      // free some; with none running it gives them up and computes its
      // history again (a preemption), so that no two wait on each other.
      if (holds && !running.empty()) continue;
      if (holds) {
        ++seq.preemptions;
        ++stats.preemptions;
      }
      // Attached blocks may need a copy the pool cannot give: try without.
      allocator.release(seq.alloc_id);
      attached = 0;
      rows = rows_wanted(seq, budget);
      at = placement_of(seq);
      if (!reserve(seq, rows, false)) {
        allocator.release(seq.alloc_id);
        continue;  // no blocks for it now; a shorter one may still fit
      }
    }
    if (!seq.started && !holds) {
      seq.cached_prompt_tokens = attached;
      stats.prefix_hit_tokens += attached;
    }
    running.push_back(std::move(seq));
    waiting.erase(it);
    scheduled.push_back(Scheduled{&running.back(), rows, at});
    budget -= rows;
  }
}

void Scheduler::Impl::run_step() {
  for (const KVAllocator::BlockCopy& c : copies) {
    if (residency != nullptr) {
      residency->copy_block(c.src, c.dst);  // wherever the published block is current
    } else {
      state.placements.front().kv->copy_blocks(c.src, c.dst, 1);
    }
  }
  const auto retire_finished = [&] {
    for (auto it = running.begin(); it != running.end();) {
      if (it->finish != FinishReason::kNone || it->scored) {
        retire(*it, it->finish);
        it = running.erase(it);
      } else {
        ++it;
      }
    }
  };
  try {
    run_forward(prefill_at);
    if (decode_at != prefill_at) run_forward(decode_at);
  } catch (...) {
    retire_finished();  // what the first pass finished is not run again
    throw;
  }
  retire_finished();
}

void Scheduler::Impl::run_forward(size_t at) {
  const Pipeline::State::Placement& placement = state.placements[at];
  KVCache& kv = *placement.kv;
  StepBatch step;
  step_tokens.clear();
  written.clear();
  logit_rows.clear();
  logit_owners.clear();
  const auto now = Clock::now();
  const auto vocab = static_cast<size_t>(state.check.hparams.n_vocab);
  int32_t running_here = 0;
  for (const Scheduled& s : scheduled) {
    if (s.placement != at) continue;
    ++running_here;
    Sequence& seq = *s.seq;
    if (!seq.started) {
      seq.started = true;
      seq.first_forward = now;
      seq.queued_seconds = seconds_between(seq.submitted, now);
    }
    const int32_t length = allocator.length(seq.alloc_id);  // after this step
    const int32_t first = length - s.rows;
    if (residency != nullptr) {
      const HandoverStats h = residency->move_in(seq.alloc_id, first, at);
      if (h.bytes > 0) {
        ++seq.kv_moves;
        seq.kv_moved_bytes += h.bytes;
        seq.kv_move_seconds += h.seconds;
        ++stats.kv_moves;
        stats.kv_moved_bytes += h.bytes;
        stats.kv_move_seconds += h.seconds;
      }
      written.push_back({seq.alloc_id, first, length});
    }
    const int32_t first_row = step.n_tokens;
    add_sequence_rows(step, allocator, seq.alloc_id, s.rows);
    const bool ends_cached = length == static_cast<int32_t>(seq.tokens.size());
    // The prompt positions whose logits it keeps whole run next, from
    // here; the last one, when this pass ends the sequence, is also the row
    // it samples from, added once below.
    const int32_t kept_rows = static_cast<int32_t>(seq.prompt_logits.size() / vocab);
    const int32_t keep_from = seq.cached_prompt_tokens + kept_rows;
    for (int32_t p = first; p < length; ++p) {
      step_tokens.push_back(seq.tokens[static_cast<size_t>(p)]);
      // A prompt position whose next token is still unscored (a preempted
      // sequence recomputes positions it scored before).
      if (seq.prompt_logprobs && p + 1 < seq.prompt_tokens &&
          p >= static_cast<int32_t>(seq.prompt_entries.size())) {
        logit_owners.push_back(
            {&seq, LogitUse::kPromptLogprobs, p, static_cast<int32_t>(logit_rows.size())});
        logit_rows.push_back(first_row + (p - first));
      }
      if (seq.keep_prompt_logits && p < seq.prompt_tokens && p >= keep_from) {
        const bool sampled_row = ends_cached && p + 1 == length;
        logit_owners.push_back(
            {&seq, LogitUse::kPromptLogits, p, static_cast<int32_t>(logit_rows.size())});
        if (!sampled_row) logit_rows.push_back(first_row + (p - first));
      }
    }
    const bool decoding = seq.generated() > seq.drafted && ends_cached && s.rows == 1 + seq.drafted;
    if (decoding) {
      stats.decode_rows += s.rows;
    } else {
      stats.prefill_rows += s.rows;
    }
    if (ends_cached && defaults.decode == nullptr) {
      // A scoring pipeline's request ends with its prompt; a kept last row
      // is the one the owner above named.
      seq.scored = true;
      if (seq.keep_prompt_logits && length - 1 >= keep_from)
        logit_rows.push_back(step.n_tokens - 1);
    } else if (ends_cached) {
      // The rows it samples from: its newest token's, then each draft token's.
      logit_owners.push_back(
          {&seq, LogitUse::kSample, -1, static_cast<int32_t>(logit_rows.size())});
      for (int32_t r = step.n_tokens - 1 - seq.drafted; r < step.n_tokens; ++r)
        logit_rows.push_back(r);
    }
  }
  if (running_here == 0) return;
  stats.peak_running = std::max(stats.peak_running, static_cast<int32_t>(scheduled.size()));
  stats.peak_used_blocks = std::max(stats.peak_used_blocks, allocator.used_blocks());

  const auto start = Clock::now();
  placement.model->forward(step_tokens, step, kv, *placement.attention, logit_rows, logits);
  for (const Written& w : written) residency->written(w.sequence, w.first, w.end, at);
  stats.forward_seconds += seconds_between(start, Clock::now());
  ++stats.steps;

  const auto done = Clock::now();
  for (const LogitOwner& owner : logit_owners) {
    Sequence& seq = *owner.seq;
    const std::span<const float> row =
        std::span<const float>(logits).subspan(static_cast<size_t>(owner.row) * vocab, vocab);
    switch (owner.use) {
      case LogitUse::kSample:
        if (seq.generated() == 0) seq.prefill_seconds = seconds_between(seq.first_forward, done);
        decode(seq, owner.row);
        break;
      case LogitUse::kPromptLogprobs:
        seq.prompt_entries.push_back(
            token_logprobs(row, seq.tokens[static_cast<size_t>(owner.prompt_position) + 1],
                           std::max(seq.top_logprobs, 0)));
        break;
      case LogitUse::kPromptLogits:
        seq.prompt_logits.insert(seq.prompt_logits.end(), row.begin(), row.end());
        break;
    }
  }
  for (const Scheduled& s : scheduled) {
    if (s.placement == at && s.seq->scored)
      s.seq->prefill_seconds = seconds_between(s.seq->first_forward, done);
  }
  // After decode() rolled back rejected draft tokens: only kept ones publish.
  if (batching.prefix_caching) {
    for (const Scheduled& s : scheduled) {
      if (s.placement == at) allocator.publish(s.seq->alloc_id, s.seq->tokens);
    }
  }
}

void Scheduler::Impl::emit(Sequence& seq, const std::string& text) {
  if (text.empty()) return;
  seq.text += text;
  if (seq.sink != nullptr) seq.sink->on_text(text);
}

void Scheduler::Impl::decode(Sequence& seq, int32_t row) {
  const int32_t drafted = seq.drafted;
  ++seq.sampled_passes;
  draft.assign(seq.tokens.end() - drafted, seq.tokens.end());
  drop_draft(seq);
  int32_t kept = 0;
  while (true) {
    const int32_t token = advance(seq, row + kept);
    const bool confirmed = kept < drafted && token == draft[static_cast<size_t>(kept)];
    kept += confirmed ? 1 : 0;
    if (!confirmed || seq.finish != FinishReason::kNone) break;
  }
  // Its chain failed: no token was drawn, so every token is cached (the
  // rejected draft tokens' positions go); the sequence retires.
  if (seq.finish == FinishReason::kFailed) {
    allocator.truncate(seq.alloc_id, static_cast<int32_t>(seq.tokens.size()));
    return;
  }
  // Every token but the newest (sampled, not yet run) stays cached: the
  // positions of the rejected draft tokens go.
  allocator.truncate(seq.alloc_id, static_cast<int32_t>(seq.tokens.size()) - 1);
  stats.draft_tokens += drafted;
  stats.accepted_draft_tokens += kept;
  if (seq.drafter == nullptr) return;
  try {
    call_named(draft_label, [&] { seq.drafter->observe(drafted, kept); });
  } catch (const Error& e) {
    seq.failure = e;  // the cache is already consistent: it ends alone
    seq.finish = FinishReason::kFailed;
  }
}

int32_t Scheduler::Impl::advance(Sequence& seq, int32_t row) {
  const auto vocab = static_cast<size_t>(state.check.hparams.n_vocab);
  const std::span<const float> row_logits =
      std::span<const float>(logits).subspan(static_cast<size_t>(row) * vocab, vocab);
  if (seq.keep_logits)
    seq.kept_logits.insert(seq.kept_logits.end(), row_logits.begin(), row_logits.end());
  const auto index = static_cast<uint64_t>(seq.generated());
  std::span<const float> drawn_from = row_logits;
  if (seq.generated() < seq.min_new_tokens) {  // min_new_tokens: no end token yet
    masked_logits.assign(row_logits.begin(), row_logits.end());
    for (int32_t id : end_tokens)
      masked_logits[static_cast<size_t>(id)] = -std::numeric_limits<float>::infinity();
    drawn_from = masked_logits;
  }
  int32_t token = 0;
  try {
    token = seq.chain->sample(drawn_from, seq.tokens, kRequestStream, index);
  } catch (const Error& e) {
    // One request's chain failing (a plugin link, named in the message)
    // ends that request alone; the step's other sequences go on.
    seq.failure = e;
    seq.finish = FinishReason::kFailed;
    return -1;  // no token: it matches no draft token
  }
  if (seq.top_logprobs >= 0)
    seq.logprobs.push_back(token_logprobs(row_logits, token, seq.top_logprobs));
  seq.tokens.push_back(token);
  ++stats.generated_tokens;
  if (seq.generated() == 1) seq.first_token_seconds = seconds_between(seq.submitted, Clock::now());
  TextStream::Pushed pushed;
  if (state.tokenizer->is_end_of_generation(token)) {
    if (!seq.ignore_end_of_generation) {
      seq.finish = FinishReason::kStop;
      return token;
    }
    // Ignored (ignore_eos), it stays out of the text too: its piece (e.g.
    // "<|im_end|>") would otherwise meet the pipeline's stop string.
  } else {
    if (seq.generated() >= seq.min_new_tokens) seq.text_stream->arm();
    pushed = seq.text_stream->push(state.tokenizer->piece(token));
    emit(seq, pushed.text);
  }
  if (pushed.stopped) {
    seq.finish = FinishReason::kStop;
  } else if (seq.generated() >= seq.max_new_tokens ||
             static_cast<int64_t>(seq.tokens.size()) > allocator.capacity_tokens()) {
    // The next forward would need a position beyond the whole cache.
    seq.finish = FinishReason::kLength;
  }
  return token;
}

void Scheduler::Impl::retire(Sequence& seq, FinishReason reason) {
  const int32_t cached = allocator.length(seq.alloc_id);
  if (!seq.hold) allocator.release(seq.alloc_id);
  if (reason != FinishReason::kCancelled) emit(seq, seq.text_stream->flush());
  RequestResult r;
  r.id = std::move(seq.id);
  r.handle = seq.handle;
  r.prompt_tokens.assign(seq.tokens.begin(), seq.tokens.begin() + seq.prompt_tokens);
  r.generated_tokens.assign(seq.tokens.begin() + seq.prompt_tokens, seq.tokens.end());
  r.text = std::move(seq.text);
  r.finish = reason;
  if (seq.failure) {
    r.error = seq.failure->what();
    r.error_kind = seq.failure->kind();
  }
  r.cached_prompt_tokens = seq.cached_prompt_tokens;
  r.cached_tokens = cached;
  r.preemptions = seq.preemptions;
  r.kv_moves = seq.kv_moves;
  r.kv_moved_bytes = seq.kv_moved_bytes;
  r.kv_move_seconds = seq.kv_move_seconds;
  r.queued_seconds = seq.queued_seconds;
  r.first_token_seconds = seq.first_token_seconds;
  r.total_seconds = seconds_between(seq.submitted, Clock::now());
  r.prefill_seconds = seq.prefill_seconds;
  r.decode_passes = std::max(0, seq.sampled_passes - 1);
  r.logits = std::move(seq.kept_logits);
  r.logprobs = std::move(seq.logprobs);
  r.prompt_logprobs = std::move(seq.prompt_entries);
  r.prompt_logits = std::move(seq.prompt_logits);
  finished.push_back(std::move(r));
  if (seq.hold) {
    // What a continuing request needs: the tokens and the cache behind them.
    Sequence kept;
    kept.alloc_id = seq.alloc_id;
    kept.tokens.assign(finished.back().prompt_tokens.begin(), finished.back().prompt_tokens.end());
    kept.tokens.insert(kept.tokens.end(), finished.back().generated_tokens.begin(),
                       finished.back().generated_tokens.end());
    held.emplace(seq.handle, std::move(kept));
  }
}

Scheduler::Scheduler(Pipeline& pipeline, bool fit_to_blocks)
    : impl_(std::make_unique<Impl>(pipeline, fitted(pipeline.state_->config.batching,
                                                    *pipeline.state_->allocator, fit_to_blocks))) {}
Scheduler::Scheduler(Pipeline& pipeline, const BatchingConfig& batching)
    : impl_(std::make_unique<Impl>(pipeline, batching)) {}
Scheduler::~Scheduler() = default;

uint64_t Scheduler::submit(Request request) { return impl_->submit(std::move(request)); }
void Scheduler::cancel(uint64_t handle) { impl_->cancel(handle); }
void Scheduler::release(uint64_t handle) { impl_->release(handle); }
bool Scheduler::step() { return impl_->step(); }
void Scheduler::run() {
  while (impl_->step()) {
  }
}

RequestResult Scheduler::run_one(Request request) {
  const uint64_t handle = submit(std::move(request));
  const auto mine = [handle](const RequestResult& r) { return r.handle == handle; };
  std::vector<RequestResult>& finished = impl_->finished;
  try {
    while (std::none_of(finished.begin(), finished.end(), mine) && step()) {
    }
  } catch (...) {
    cancel(handle);
    release(handle);
    finished.erase(std::remove_if(finished.begin(), finished.end(), mine), finished.end());
    throw;
  }
  const auto it = std::find_if(finished.begin(), finished.end(), mine);
  if (it == finished.end()) {
    throw Error(ErrorKind::kInternal,
                "request " + std::to_string(handle) + " left the scheduler without a result");
  }
  RequestResult result = std::move(*it);
  finished.erase(it);
  if (result.finish == FinishReason::kFailed) {
    release(handle);
    throw Error(result.error_kind, result.error);
  }
  return result;
}

std::vector<RequestResult> Scheduler::take_finished() {
  std::vector<RequestResult> out;
  out.swap(impl_->finished);
  return out;
}

std::optional<int32_t> Scheduler::generated_tokens(uint64_t handle) const {
  for (const Impl::Sequence& seq : impl_->running) {
    if (seq.handle == handle) return seq.generated();
  }
  for (const Impl::Sequence& seq : impl_->waiting) {
    if (seq.handle == handle) return seq.generated();
  }
  return std::nullopt;
}

std::span<const TokenLogprobs> Scheduler::logprobs(uint64_t handle) const {
  for (const Impl::Sequence& seq : impl_->running) {
    if (seq.handle == handle) return seq.logprobs;
  }
  for (const Impl::Sequence& seq : impl_->waiting) {
    if (seq.handle == handle) return seq.logprobs;
  }
  return {};
}

size_t Scheduler::waiting() const { return impl_->waiting.size(); }
size_t Scheduler::running() const { return impl_->running.size(); }
const SchedulerStats& Scheduler::stats() const { return impl_->stats; }
int64_t Scheduler::total_blocks() const { return impl_->allocator.total_blocks(); }
int64_t Scheduler::used_blocks() const { return impl_->allocator.used_blocks(); }
int64_t Scheduler::cached_blocks() const { return impl_->allocator.cached_blocks(); }

}  // namespace duet
