#include "duet/pipeline.h"

#include <chrono>
#include <cmath>
#include <new>
#include <optional>

#include "backend_components.h"
#include "duet/chat_template.h"
#include "duet/device.h"
#include "duet/error.h"
#include "duet/gguf.h"
#include "session_impl.h"
#include "stages/decode_stage.h"
#include "stages/prefill_stage.h"

namespace duet {
struct Pipeline::State {
  PipelineConfig config;
  PipelineCheck check;
  std::shared_ptr<const GgufFile> file;
  std::unique_ptr<Tokenizer> tokenizer;
  std::optional<ChatTemplate> chat;
  std::shared_ptr<Backend> backend;
  std::unique_ptr<LlamaModel> model;
  std::shared_ptr<KVCache> kv;
  std::unique_ptr<KVAllocator> allocator;
  std::shared_ptr<Attention> attention;
  std::unique_ptr<SamplerChain> chain;
  std::vector<std::shared_ptr<Stage>> stages;
  double load_seconds = 0.0;
};

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
  s->backend = host.create_backend(c.backend, c.backend_options);
  s->model = std::make_unique<LlamaModel>(s->file, c.hparams, *s->backend);
  s->kv = make_kv_cache(*s->backend, host, c.kv_cache, config.kv_cache.options);
  s->allocator = std::make_unique<KVAllocator>(c.kv_cache.capacity_tokens, c.kv_cache.block_tokens);
  const ModelHParams& h = c.hparams;
  s->attention = make_attention(
      *s->backend, host, c.attention_impl,
      AttentionSpec{h.n_heads, h.n_kv_heads, h.head_dim, 1.0f / std::sqrt(float(h.head_dim))},
      config.attention.options);

  std::vector<std::shared_ptr<Sampler>> links;
  for (const auto& link : config.sampler.chain)
    links.push_back(host.create_sampler(link.name, link.options));
  s->chain = std::make_unique<SamplerChain>(config.sampler.seed, std::move(links));
  for (const auto& stage : config.stages) {
    if (stage.name == "prefill") {
      s->stages.push_back(std::make_shared<PrefillStage>(parse_prefill_options(stage)));
    } else if (stage.name == "decode") {
      s->stages.push_back(std::make_shared<DecodeStage>(parse_decode_options(stage)));
    } else {
      s->stages.push_back(host.create_stage(stage.name, stage.options));
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
constexpr std::string_view kUserMarker = "\x01duet-user-text\x01";
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

std::unique_ptr<Session> Pipeline::new_session(std::span<const int32_t> prompt, TextSink& sink) {
  State& s = *state_;
  const int32_t vocab = s.check.hparams.n_vocab;
  if (prompt.empty()) throw Error(ErrorKind::kInputRejected, "the prompt has no tokens");
  if (s.allocator->length(Session::Impl::kSequence) != 0) {
    throw Error(ErrorKind::kInternal, "a session of this pipeline is still open; destroy it first");
  }
  check_prompt_ids(prompt, vocab);
  return std::make_unique<Session>(std::make_unique<Session::Impl>(
      *s.model, *s.kv, *s.allocator, *s.attention, *s.chain, *s.tokenizer, sink, prompt));
}

RunResult Pipeline::run_tokens(std::span<const int32_t> prompt, TextSink& sink) {
  RecordingSink recorder(sink);
  std::unique_ptr<Session> session = new_session(prompt, recorder);
  RunResult r = run_stages(*session);
  r.text = std::move(recorder.text());
  return r;
}

RunResult Pipeline::run_stages(Session& session) {
  const auto turn_start = static_cast<std::ptrdiff_t>(session.tokens().size());
  for (const auto& stage : state_->stages) {
    if (session.finish_reason() != FinishReason::kNone) break;
    try {
      stage->run(session);
    } catch (const Error&) {
      throw;
    } catch (const std::bad_alloc&) {
      throw;  // out of memory, not a broken plugin: exit code 5
    } catch (const std::exception& e) {
      throw Error(ErrorKind::kPlugin, "stage '" + stage->name() + "' failed: " + e.what());
    }
  }
  RunResult r;
  auto all = session.tokens();
  r.prompt_tokens.assign(all.begin() + (turn_start - session.stats().prompt_tokens),
                         all.begin() + turn_start);
  r.generated_tokens.assign(all.begin() + turn_start, all.end());
  r.finish = session.finish_reason();
  r.stats = session.stats();
  r.prompt_logits = std::move(session.kept_logits());
  return r;
}

const PipelineCheck& Pipeline::check() const { return state_->check; }
const Tokenizer& Pipeline::tokenizer() const { return *state_->tokenizer; }
std::string Pipeline::sampler_order() const { return state_->chain->describe(); }
uint64_t Pipeline::kv_cache_bytes() const { return state_->kv->memory_bytes(); }
double Pipeline::load_seconds() const { return state_->load_seconds; }

std::optional<uint64_t> Pipeline::device_memory_in_use() const {
  const Device& device = state_->backend->device();
  if (device.host_accessible()) return std::nullopt;
  const MemoryInfo m = device.memory();
  if (m.total_bytes == 0 || m.free_bytes > m.total_bytes) return std::nullopt;
  return m.total_bytes - m.free_bytes;
}

}  // namespace duet
