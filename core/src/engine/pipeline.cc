#include "duet/app/pipeline.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <optional>

#include "duet/app/chat_template.h"
#include "duet/app/gguf.h"
#include "duet/app/plugin_host.h"
#include "duet/app/scheduler.h"
#include "duet/device.h"
#include "duet/error.h"
#include "engine/pipeline_state.h"
#include "engine/session_impl.h"
#include "engine/stage_options.h"
#include "engine/stages/decode_stage.h"
#include "plugins/backend_components.h"

namespace duet {
std::unique_ptr<SamplerChain> Pipeline::State::make_chain(
    uint64_t seed, const SamplerOverrides& overrides,
    const std::map<std::string, std::string>& grammar) const {
  std::vector<std::shared_ptr<Sampler>> links;
  std::vector<std::string> names, labels;
  const std::vector<ComponentInfo> samplers = host->components(ComponentKind::kSampler);
  if (!grammar.empty()) {
    for (const SamplerLink& link : config.sampler.chain) {
      if (link.name == "grammar") {
        throw Error(ErrorKind::kConfig,
                    "grammar: the pipeline's sampler chain has a grammar link of its own; a "
                    "request cannot add a second (use a pipeline without one)");
      }
    }
    if (!host->has(ComponentKind::kSampler, "grammar")) {
      throw Error(
          ErrorKind::kConfig,
          "grammar: structured output needs the 'grammar' sampler plugin (duet-grammar.so), "
          "which is not loaded; `duet plugins` says why");
    }
    Options options("grammar");
    for (const auto& [key, value] : grammar) options.set(key, value);
    links.push_back(host->create_sampler("grammar", options, tokenizer.get()));
    labels.push_back("sampler 'grammar' (the request's)");
  }
  for (const SamplerLink& link : config.sampler.chain) {
    std::string plugin = "core";
    for (const ComponentInfo& c : samplers) {
      if (c.name == link.name) plugin = c.plugin;
    }
    labels.push_back("sampler '" + link.name + "' (plugin '" + plugin +
                     "', components.sampler.chain[" + std::to_string(names.size()) + "])");
    names.push_back(link.name);
    Options options = link.options;
    if (auto it = overrides.find(link.name); it != overrides.end()) {
      for (const auto& [key, value] : it->second) options.set(key, value);
    }
    links.push_back(host->create_sampler(link.name, options, tokenizer.get()));
  }
  for (const auto& [name, values] : overrides) {
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      std::string chain;
      for (const std::string& n : names) chain += (chain.empty() ? "" : ", ") + n;
      throw Error(ErrorKind::kConfig,
                  "sampler." + name + ": the pipeline's sampler chain has no '" + name +
                      "' link (it has: " + (chain.empty() ? "none" : chain) +
                      "); a request can set options of the chain's links, not add links");
    }
  }
  return std::make_unique<SamplerChain>(seed, std::move(links), std::move(labels));
}

Pipeline::Pipeline(std::unique_ptr<State> state) : state_(std::move(state)) {}
Pipeline::~Pipeline() = default;

std::unique_ptr<Pipeline> Pipeline::build(const PipelineConfig& config, const PluginHost& host) {
  const auto start = std::chrono::steady_clock::now();
  auto s = std::make_unique<State>();
  s->config = config;
  s->check = check_pipeline(config, host);
  const PipelineCheck& c = s->check;

  s->file = std::make_shared<const GgufFile>(GgufFile::open(config.model.path));
  s->tokenizer = load_tokenizer(*s->file);
  if (config.model.chat) s->chat = ChatTemplate::from_model(*s->file, config.model.chat_template);
  const ModelHParams& h = c.hparams;
  // One bookkeeping for every cache: a sequence has the same slots in each.
  std::optional<WindowRingGeometry> rings;
  if (c.window_cache.n_layers > 0) {
    rings = WindowRingGeometry{*std::max_element(h.layer_windows.begin(), h.layer_windows.end()),
                               c.window_ring_tokens, c.window_cache.block_tokens,
                               c.window_cache.capacity_tokens};
  }
  s->allocator =
      std::make_unique<KVAllocator>(c.kv_cache.capacity_tokens, c.kv_cache.block_tokens, rings);
  for (BackendPlacement& p : s->check.placements) {
    State::Placement& made = s->placements.emplace_back();
    made.backend =
        p.instance ? std::move(p.instance) : host.create_backend(p.backend, p.backend_options);
    made.model = make_model(s->file, c.hparams, *made.backend, host.backend_abi_minor(p.backend));
    made.kv =
        make_kv_cache(*made.backend, host, p.kv_cache, config.kv_cache.options, p.attention_impl);
    made.kv_abi_minor =
        kv_cache_abi_minor(*made.backend, host, p.kv_cache, config.kv_cache.options);
    if (p.window_cache.n_layers > 0)
      made.window_kv = make_kv_cache(*made.backend, host, p.window_cache, config.kv_cache.options,
                                     p.attention_impl);
    made.attention = make_model_attention(
        *made.backend, host, p.attention_impl, h, config.attention.options,
        config.debug.check_plugins,
        WindowCache{p.window_cache, made.window_kv.get(), s->allocator->window_rings()});
  }
  if (s->placements.size() > 1) {
    std::vector<KVEndpoint> caches;
    for (const State::Placement& p : s->placements) caches.push_back({*p.kv, p.kv_abi_minor});
    s->residency = std::make_unique<KVResidency>(std::move(caches), *s->allocator);
  }

  s->host = &host;
  s->make_chain(config.sampler.seed, {});  // every link's options checked once here
  // check_pipeline() found core's prefill, then at most one decode stage.
  s->prefill = parse_prefill_options(config.stages.at(0));
  if (config.stages.size() > 1) {
    const StageConfig& stage = config.stages[1];
    if (stage.name == "decode") {
      s->decode = std::make_shared<DecodeStage>(parse_decode_options(stage));
    } else {
      s->decode = host.create_stage(stage.name, stage.options);
    }
  }
  s->load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return std::unique_ptr<Pipeline>(new Pipeline(std::move(s)));
}

std::vector<int32_t> Pipeline::encode_wrapped(const std::string& wrapped, std::string_view marker,
                                              std::string_view user) const {
  // The template's own markup is parsed for control tokens; the user's text
  // is not, so "<|im_end|>" typed in a prompt stays text. The template is
  // applied around a marker (no real message contains it), then split there.
  const Tokenizer& t = *state_->tokenizer;
  const size_t at = wrapped.find(marker);
  std::vector<int32_t> ids = t.encode(std::string_view(wrapped).substr(0, at), true);
  const auto append = [&ids](const std::vector<int32_t>& more) {
    ids.insert(ids.end(), more.begin(), more.end());
  };
  append(t.encode(user, false));
  append(t.encode(std::string_view(wrapped).substr(at + marker.size()), true));
  return ids;
}

namespace {
constexpr std::string_view kUserMarker =
    "\x01"
    "duet-user-text\x01";
}  // namespace

std::vector<int32_t> Pipeline::tokenize_prompt(const std::string& prompt,
                                               bool parse_special) const {
  if (prompt.empty()) {
    throw Error(ErrorKind::kInputRejected, "the prompt is empty; pass --prompt with some text");
  }
  const State& s = *state_;
  if (parse_special && s.chat) {
    throw Error(ErrorKind::kUsage,
                "control tokens are parsed in raw prompts only; a chat message (model.chat: "
                "true) is always plain text: drop --parse-special or use --set model.chat=false");
  }
  std::vector<int32_t> ids;
  if (s.tokenizer->add_bos() && s.tokenizer->bos_id()) ids.push_back(*s.tokenizer->bos_id());
  std::vector<int32_t> text_ids;
  if (s.chat) {
    std::optional<std::string_view> system;
    if (!s.config.model.system_prompt.empty()) system = s.config.model.system_prompt;
    text_ids = encode_wrapped(s.chat->apply(system, kUserMarker), kUserMarker, prompt);
  } else {
    text_ids = s.tokenizer->encode(prompt, parse_special);
  }
  ids.insert(ids.end(), text_ids.begin(), text_ids.end());
  return ids;
}

std::vector<int32_t> Pipeline::tokenize_next_turn(const std::string& message,
                                                  bool answer_closed) const {
  if (message.empty())
    throw Error(ErrorKind::kInputRejected, "the message is empty; type some text");
  const State& s = *state_;
  if (!s.chat) return s.tokenizer->encode(message, false);
  return encode_wrapped(s.chat->apply_next(kUserMarker, answer_closed), kUserMarker, message);
}

RunResult Pipeline::run(const std::string& prompt, TextSink& sink) {
  return run_tokens(tokenize_prompt(prompt), sink);
}

std::unique_ptr<Session> Pipeline::new_session(std::span<const int32_t> prompt) {
  State& s = *state_;
  const int32_t vocab = s.check.hparams.n_vocab;
  if (prompt.empty()) throw Error(ErrorKind::kInputRejected, "the prompt has no tokens");
  check_prompt_ids(prompt, vocab);
  const size_t first = s.check.stage_placement.empty() ? 0 : s.check.stage_placement.front();
  State::Placement& p = s.placements[first];
  auto impl = std::make_unique<Session::Impl>(*p.model, *p.kv, *s.allocator, s.next_sequence++,
                                              *p.attention, s.make_chain(s.config.sampler.seed, {}),
                                              prompt);
  impl->placement = first;
  impl->residency = s.residency.get();
  return std::make_unique<Session>(std::move(impl));
}

void Pipeline::move_to_stage(Session& session, size_t stage) {
  const size_t to = state_->check.stage_placement.at(stage);
  Session::Impl& s = *session.impl_;
  if (s.placement == to) return;
  State::Placement& dst = state_->placements[to];
  // Only the blocks not current in the new stage's cache move (kv_residency.h).
  state_->residency->move_in(s.sequence, s.allocator.length(s.sequence), to);
  s.model = dst.model.get();
  s.kv = dst.kv.get();
  s.attention = dst.attention.get();
  s.placement = to;
}

RunResult Pipeline::run_tokens(std::span<const int32_t> prompt, TextSink& sink) {
  if (prompt.empty()) throw Error(ErrorKind::kInputRejected, "the prompt has no tokens");
  Request request;
  request.prompt.assign(prompt.begin(), prompt.end());
  request.sink = &sink;
  request.settings.prompt_logits = state_->prefill.all_logits;
  return run_result(engine().run_one(std::move(request)));
}

Scheduler& Pipeline::engine() {
  State& s = *state_;
  if (!s.engine) {
    BatchingConfig batching = s.config.batching;
    batching.max_sequences = 1;
    batching.prefix_caching = false;
    // One sequence: draft_rows, which shares a step among sequences, does
    // not bound its drafts (the stage's own options and the step do).
    batching.draft_rows = std::numeric_limits<int32_t>::max();
    const int32_t chunk = s.prefill.chunk_tokens;
    batching.max_step_tokens =
        chunk > 0 ? chunk
                  : static_cast<int32_t>(std::min<int64_t>(s.allocator->capacity_tokens(),
                                                           std::numeric_limits<int32_t>::max()));
    s.engine = std::make_unique<Scheduler>(*this, batching);
  }
  return *s.engine;
}

RunResult run_result(RequestResult&& r) {
  RunResult out;
  const auto from = static_cast<std::ptrdiff_t>(r.cached_prompt_tokens);
  out.prompt_tokens.assign(r.prompt_tokens.begin() + from, r.prompt_tokens.end());
  out.generated_tokens = std::move(r.generated_tokens);
  out.text = std::move(r.text);
  out.finish = r.finish;
  out.prompt_logits = std::move(r.prompt_logits);
  RunStats& st = out.stats;
  st.prompt_tokens = static_cast<int32_t>(out.prompt_tokens.size());
  st.generated_tokens = static_cast<int32_t>(out.generated_tokens.size());
  st.prefill_seconds = r.prefill_seconds;
  st.first_token_seconds = r.first_token_seconds;
  if (st.generated_tokens > 0) st.decode_seconds = r.total_seconds - r.first_token_seconds;
  st.decode_passes = r.decode_passes;
  st.handovers = r.kv_moves;
  st.handover_bytes = r.kv_moved_bytes;
  st.handover_seconds = r.kv_move_seconds;
  return out;
}

const PipelineCheck& Pipeline::check() const { return state_->check; }
const Tokenizer& Pipeline::tokenizer() const { return *state_->tokenizer; }
std::string Pipeline::sampler_order() const {
  std::string out;
  for (const SamplerLink& link : state_->config.sampler.chain)
    out += (out.empty() ? "" : " -> ") + link.name;
  return out.empty() ? "draw" : out;
}
uint64_t Pipeline::kv_cache_bytes() const {
  uint64_t bytes = 0;
  for (const State::Placement& p : state_->placements) {
    bytes += p.kv->memory_bytes();
    if (p.window_kv) bytes += p.window_kv->memory_bytes();
  }
  return bytes;
}
double Pipeline::load_seconds() const { return state_->load_seconds; }

std::optional<uint64_t> Pipeline::device_memory_in_use() const {
  for (const State::Placement& p : state_->placements) {
    const Device& device = p.backend->device();
    if (device.host_accessible()) continue;
    const MemoryInfo m = device.memory();
    if (m.total_bytes == 0 || m.free_bytes > m.total_bytes) return std::nullopt;
    return m.total_bytes - m.free_bytes;
  }
  return std::nullopt;
}

}  // namespace duet
