#include "py_pipeline.h"

#include <nanobind/nanobind.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "chat_messages.h"
#include "duet/app/gguf.h"
#include "duet/app/perplexity.h"
#include "duet/app/pipeline_check.h"
#include "duet/error.h"
#include "request_fields.h"

namespace nb = nanobind;

namespace duet::python {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

// The fields of a request object besides those read_request_settings reads.
const std::vector<std::string> kOtherKeys = {"prompt", "messages", "response_format", "grammar",
                                             "prompt_logprobs"};

[[noreturn]] void fail(const std::string& param, const std::string& message) {
  throw serve::FieldError{param, message};
}

}  // namespace

// A request's text as the scheduler produces it, read by next().
struct PyPipeline::Stream final : TextSink {
  std::deque<std::string> pieces;
  void on_text(std::string_view text) override { pieces.emplace_back(text); }
};

PluginHost& plugin_host() {
  static PluginHost* host = new PluginHost;  // never destroyed: see the header
  return *host;
}

std::mutex& plugin_host_mutex() {
  static std::mutex mutex;
  return mutex;
}

PyPipeline::PyPipeline(const std::string& source, const std::vector<std::string>& overrides) {
  config_ = is_model_path(source)
                ? parse_pipeline_config(default_pipeline_yaml(source),
                                        "default pipeline for " + source, "", overrides)
                : load_pipeline_config(source, overrides);
  nb::gil_scoped_release release;
  std::lock_guard host(plugin_host_mutex());
  load_pipeline_plugins(config_, plugin_host());
  pipeline_ = Pipeline::build(config_, plugin_host());
  scheduler_ = std::make_unique<Scheduler>(*pipeline_, true);
}

PyPipeline::~PyPipeline() = default;

int32_t PyPipeline::n_vocab() const { return pipeline_->check().hparams.n_vocab; }

const ChatTemplate& PyPipeline::chat_template() {
  if (!chat_) {
    chat_ =
        ChatTemplate::from_model(GgufFile::open(config_.model.path), config_.model.chat_template);
  }
  return *chat_;
}

Request PyPipeline::read_request(const std::string& object_text, bool logits) {
  const json object = serve::parse_request_object(object_text);
  for (const auto& [key, value] : object.items()) {
    const std::vector<std::string>& settings = serve::request_setting_keys();
    if (std::find(kOtherKeys.begin(), kOtherKeys.end(), key) == kOtherKeys.end() &&
        std::find(settings.begin(), settings.end(), key) == settings.end()) {
      fail(key, key +
                    ": not a generation setting; the settings are those of a prompts-file "
                    "line (docs/python.md)");
    }
  }
  if (object.contains("prompt") == object.contains("messages"))
    fail("prompt", "give exactly one of prompt (text or token ids) and messages");
  Request r;
  if (object.contains("messages")) {
    const std::vector<serve::ChatMessage> messages = serve::read_messages(object.at("messages"));
    std::optional<std::string> system;
    if (!config_.model.system_prompt.empty()) system = config_.model.system_prompt;
    r.prompt = serve::tokenize_messages(pipeline_->tokenizer(), chat_template(), system, messages);
  } else if (const json& p = object.at("prompt"); p.is_string()) {
    if (p.get<std::string>().empty()) fail("prompt", "prompt is empty; give some text");
    r.prompt = pipeline_->tokenize_prompt(p.get<std::string>());
  } else if (p.is_array()) {
    if (p.empty()) fail("prompt", "prompt is an empty list; give token ids");
    for (const json& id : p) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= n_vocab())
        fail("prompt", "prompt: " + id.dump() + " is not a token id in [0, " +
                           std::to_string(n_vocab() - 1) + "]");
      r.prompt.push_back(static_cast<int32_t>(id.get<int64_t>()));
    }
  } else {
    fail("prompt", "prompt: expected text or a list of token ids");
  }
  json settings = json::object();
  for (const auto& [key, value] : object.items()) {
    if (std::find(kOtherKeys.begin(), kOtherKeys.end(), key) == kOtherKeys.end())
      settings[key] = value;
  }
  serve::read_request_settings(settings, config_.sampler.chain, r.settings);
  serve::read_structured_output(object, object_text, r.settings);
  if (object.contains("prompt_logprobs")) {
    if (!object.at("prompt_logprobs").is_boolean())
      fail("prompt_logprobs", "prompt_logprobs: expected true or false");
    r.settings.prompt_logprobs = object.at("prompt_logprobs").get<bool>();
  }
  r.settings.keep_logits = logits;
  return r;
}

void PyPipeline::collect() {
  for (RequestResult& r : scheduler_->take_finished()) {
    const uint64_t id = std::stoull(r.id);
    handles_.erase(id);
    results_.emplace(id, std::move(r));
  }
}

void PyPipeline::drop(const std::vector<uint64_t>& ids) {
  for (const uint64_t id : ids) {
    if (const auto it = handles_.find(id); it != handles_.end()) scheduler_->cancel(it->second);
  }
  collect();
  for (const uint64_t id : ids) {
    results_.erase(id);
    streams_.erase(id);
    handles_.erase(id);
  }
}

std::vector<uint64_t> PyPipeline::submit(std::vector<Request> requests,
                                         const std::shared_ptr<Stream>& stream) {
  nb::gil_scoped_release release;
  std::lock_guard lock(mutex_);
  std::lock_guard host(plugin_host_mutex());  // the chain's links are made from its plugins
  std::vector<uint64_t> ids;
  for (size_t i = 0; i < requests.size(); ++i) {
    Request& r = requests[i];
    const uint64_t id = next_id_++;
    r.id = std::to_string(id);
    r.sink = stream.get();
    try {
      handles_[id] = scheduler_->submit(std::move(r));
    } catch (const Error& e) {
      // None of them runs: the ones before it are cancelled. The scheduler
      // names the request by its id; the caller knows it by its place.
      drop(ids);
      std::string what = e.what();
      const std::string tag = "request '" + std::to_string(id) + "'";
      const std::string place =
          requests.size() == 1 ? "the request" : "requests[" + std::to_string(i) + "]";
      if (what.rfind(tag, 0) == 0) {
        what.replace(0, tag.size(), place);
      } else if (requests.size() > 1) {
        what = place + ": " + what;
      }
      throw Error(e.kind(), what);
    }
    ids.push_back(id);
  }
  if (stream) streams_[ids.front()] = stream;
  return ids;
}

void PyPipeline::step(const std::vector<uint64_t>& mine) {
  {
    nb::gil_scoped_release release;
    std::lock_guard lock(mutex_);
    try {
      scheduler_->step();
      collect();
    } catch (...) {
      drop(mine);  // the caller's requests end with it; others' results are kept
      throw;
    }
  }
  if (PyErr_CheckSignals() != 0) {
    {
      nb::gil_scoped_release release;
      std::lock_guard lock(mutex_);
      drop(mine);
    }
    throw nb::python_error();
  }
}

RequestResult PyPipeline::wait_for(uint64_t id, const std::vector<uint64_t>& mine) {
  while (true) {
    {
      nb::gil_scoped_release release;
      std::lock_guard lock(mutex_);
      if (const auto it = results_.find(id); it != results_.end()) {
        RequestResult r = std::move(it->second);
        results_.erase(it);
        streams_.erase(id);
        return r;
      }
      if (handles_.count(id) == 0) {
        throw Error(ErrorKind::kUsage,
                    "this request was cancelled (Ctrl-C, close(), or an error while it ran); "
                    "its result is gone");
      }
    }
    step(mine);
  }
}

std::vector<Generation> PyPipeline::run(const std::string& requests, bool logits) {
  ordered_json list;
  try {
    if (serve::json_nesting(requests) <= serve::kMaxNesting) list = ordered_json::parse(requests);
  } catch (const json::exception& e) {
    fail("", std::string("not valid JSON: ") + e.what());
  }
  if (!list.is_array()) fail("", "expected a list of requests");
  std::vector<Request> read;
  for (size_t i = 0; i < list.size(); ++i) {
    try {
      read.push_back(read_request(list[i].dump(), logits));
    } catch (const serve::FieldError& e) {
      if (list.size() == 1) throw;
      throw serve::FieldError{e.param, "requests[" + std::to_string(i) + "]: " + e.message};
    }
  }
  const std::vector<uint64_t> ids = submit(std::move(read), nullptr);
  std::vector<Generation> out;
  for (const uint64_t id : ids) out.push_back(to_generation(wait_for(id, ids), n_vocab()));
  return out;
}

uint64_t PyPipeline::start(const std::string& request) {
  std::vector<Request> one;
  one.push_back(read_request(request, false));
  return submit(std::move(one), std::make_shared<Stream>()).front();
}

std::optional<std::string> PyPipeline::next(uint64_t handle) {
  while (true) {
    {
      nb::gil_scoped_release release;
      std::lock_guard lock(mutex_);
      const auto it = streams_.find(handle);
      if (it == streams_.end()) return std::nullopt;  // read to its end, or cancelled
      if (!it->second->pieces.empty()) {
        std::string piece = std::move(it->second->pieces.front());
        it->second->pieces.pop_front();
        return piece;
      }
      if (results_.count(handle) != 0) return std::nullopt;  // ended, every piece read
    }
    step({handle});
  }
}

Generation PyPipeline::finished(uint64_t handle) {
  return to_generation(wait_for(handle, {handle}), n_vocab());
}

void PyPipeline::cancel(uint64_t handle) {
  nb::gil_scoped_release release;
  std::lock_guard lock(mutex_);
  drop({handle});
}

double PyPipeline::perplexity(const std::string& text, int32_t ctx) {
  const int64_t capacity = pipeline_->check().kv_cache.capacity_tokens;
  if (ctx != 0 && (ctx < 4 || ctx > capacity)) {
    fail("ctx", "ctx: " + std::to_string(ctx) + " is not 0 (the whole text at once) or in [4, " +
                    std::to_string(capacity) + "] (the KV cache's tokens)");
  }
  const Tokenizer& tokenizer = pipeline_->tokenizer();
  std::vector<int32_t> ids;
  if (tokenizer.add_bos() && tokenizer.bos_id()) ids.push_back(*tokenizer.bos_id());
  const std::vector<int32_t> text_ids = tokenizer.encode(text, false);
  ids.insert(ids.end(), text_ids.begin(), text_ids.end());
  const auto n = static_cast<int64_t>(ids.size());
  if (ctx == 0 && n > capacity) {
    throw Error(ErrorKind::kInputRejected,
                "the text is " + std::to_string(n) + " tokens and the KV cache holds " +
                    std::to_string(capacity) + "; score it in windows (ctx=512) or raise " +
                    "components.kv_cache.capacity_tokens");
  }
  const std::vector<ScoringWindow> windows =
      ids.size() < 2 ? std::vector<ScoringWindow>{} : scoring_windows(n, ctx);
  if (windows.empty()) {
    throw Error(ErrorKind::kInputRejected,
                "the text is " + std::to_string(n) + " token(s); perplexity needs at least " +
                    (ctx == 0 ? std::string("2") : std::to_string(ctx) + " (one window)") +
                    "; give a longer text" + (ctx == 0 ? "" : " or a smaller ctx"));
  }
  std::vector<Request> requests;
  for (const ScoringWindow& w : windows) {
    Request r;
    r.prompt.assign(ids.begin() + w.begin, ids.begin() + w.begin + w.length);
    // As llama-perplexity: each window starts with BOS where the model wants one.
    if (ctx > 0 && tokenizer.add_bos() && tokenizer.bos_id())
      r.prompt.front() = *tokenizer.bos_id();
    r.settings.max_new_tokens = 1;
    r.settings.prompt_logprobs = true;
    requests.push_back(std::move(r));
  }
  const std::vector<uint64_t> mine = submit(std::move(requests), nullptr);
  double sum = 0.0;
  int64_t scored = 0;
  for (size_t k = 0; k < windows.size(); ++k) {
    const RequestResult r = wait_for(mine[k], mine);
    if (r.finish == FinishReason::kFailed) throw Error(r.error_kind, r.error);
    // Entry i scores prompt token i + 1.
    for (int32_t pos = windows[k].first_scored; pos + 1 < windows[k].length; ++pos) {
      sum += r.prompt_logprobs.at(static_cast<size_t>(pos)).chosen.logprob;
      ++scored;
    }
  }
  return std::exp(-sum / static_cast<double>(scored));
}

std::vector<int32_t> PyPipeline::tokenize(const std::string& text, bool special) const {
  return pipeline_->tokenizer().encode(text, special);
}

std::string PyPipeline::detokenize(const std::vector<int32_t>& ids) const {
  for (int32_t id : ids) {
    if (id < 0 || id >= n_vocab()) {
      throw Error(ErrorKind::kInputRejected, "token id " + std::to_string(id) +
                                                 " is outside the vocabulary [0, " +
                                                 std::to_string(n_vocab()) + ")");
    }
  }
  return pipeline_->tokenizer().decode(ids);
}

Generation to_generation(RequestResult r, int32_t n_vocab) {
  Generation g;
  g.decode_tokens_per_s = r.decode_tokens_per_second();  // before the tokens move
  g.text = std::move(r.text);
  g.token_ids = std::move(r.generated_tokens);
  g.prompt_token_ids = std::move(r.prompt_tokens);
  g.finish_reason = finish_reason_name(r.finish);
  g.error = std::move(r.error);
  g.queued_s = r.queued_seconds;
  g.first_token_s = r.first_token_seconds;
  g.total_s = r.total_seconds;
  g.cached_prompt_tokens = r.cached_prompt_tokens;
  g.n_vocab = n_vocab;
  if (!r.logits.empty()) g.logits = std::make_shared<std::vector<float>>(std::move(r.logits));
  for (const TokenLogprobs& e : r.prompt_logprobs) g.prompt_logprobs.push_back(e.chosen.logprob);
  return g;
}

}  // namespace duet::python
