#include "serve_handler.h"

#include <boost/asio/post.hpp>
#include <chrono>
#include <iostream>

#include "duet/tokenizer.h"

namespace duet::serve {
namespace {

namespace net = boost::asio;
using nlohmann::json;

constexpr const char* kJson = "application/json";
using SystemClock = std::chrono::system_clock;
using SteadyClock = std::chrono::steady_clock;

}  // namespace

// The exchange of one request as the handler answers it: adds the headers
// every answer of it carries (CORS), sends no body to a HEAD request, and
// writes its access-log line when the answer ends — or, when the client
// went away first, when the last owner lets go of it.
class LoggedExchange final : public HttpExchange {
 public:
  LoggedExchange(std::shared_ptr<HttpExchange> inner, AccessEntry entry, AccessLogFormat format)
      : inner_(std::move(inner)), entry_(std::move(entry)), format_(format) {}
  ~LoggedExchange() override {
    if (logged_) return;
    if (entry_.status == 0) entry_.status = 499;
    if (entry_.finish_reason.empty() && !entry_.id.empty()) entry_.finish_reason = "disconnected";
    log();
  }

  // A header every answer of this request carries (CORS, Duet-Ignored-Fields).
  void set_header(const std::string& name, const std::string& value) { headers_.set(name, value); }
  void set_header(http::field name, const std::string& value) { headers_.set(name, value); }
  // The completion's part of the line, once every choice finished.
  void record(const std::string& id, const Usage& usage, double first_token_seconds,
              FinishReason finish) {
    entry_.id = id;
    entry_.prompt_tokens = usage.prompt_tokens;
    entry_.completion_tokens = usage.completion_tokens;
    entry_.first_token_seconds = first_token_seconds;
    entry_.finish_reason = finish_reason_name(finish);
  }
  void record_id(const std::string& id) { entry_.id = id; }

  void reply(HttpResponse response) override {
    for (const auto& field : headers_) response.set(field.name_string(), field.value());
    if (entry_.method == "HEAD") {  // the GET answer's headers, no body
      response.content_length(response.body().size());
      response.body().clear();
    }
    entry_.status = static_cast<int>(response.result_int());
    inner_->reply(std::move(response));
    log();
  }
  void start_stream(http::status status, const http::fields& headers) override {
    http::fields all = headers;
    for (const auto& field : headers_) all.set(field.name_string(), field.value());
    entry_.status = static_cast<int>(status);
    inner_->start_stream(status, all);
  }
  void stream_write(std::string data) override { inner_->stream_write(std::move(data)); }
  void end_stream() override {
    inner_->end_stream();
    log();
  }
  bool closed() const override { return inner_->closed(); }
  void on_close(std::function<void()> callback) override { inner_->on_close(std::move(callback)); }

 private:
  void log() {
    if (logged_) return;
    logged_ = true;
    if (format_ == AccessLogFormat::kNone) return;
    entry_.seconds = std::chrono::duration<double>(SteadyClock::now() - started_).count();
    std::cerr << format_access_entry(entry_, format_) + "\n" << std::flush;
  }

  const std::shared_ptr<HttpExchange> inner_;
  AccessEntry entry_;
  const AccessLogFormat format_;
  const SteadyClock::time_point started_ = SteadyClock::now();
  http::fields headers_;
  bool logged_ = false;
};

namespace {

// One completion request from its arrival to its last byte: the engine's
// events for each of its choices (one engine job each), moved onto the
// connection thread, become the response.
class RequestRun final : public std::enable_shared_from_this<RequestRun> {
 public:
  // `tool_syntax`: how the answers' tool calls are read, when the request
  // offers tools.
  RequestRun(net::io_context& io, std::shared_ptr<LoggedExchange> exchange, ServeMetrics& metrics,
             const CompletionRequest& request, Completed completed, const Tokenizer& tokenizer,
             ChatTemplate::ToolSyntax tool_syntax)
      : io_(io),
        exchange_(std::move(exchange)),
        metrics_(metrics),
        tokenizer_(tokenizer),
        endpoint_(request.endpoint),
        stream_(request.stream),
        include_usage_(request.include_usage),
        echo_(request.echo),
        prompts_(request.prompts),
        n_(request.n),
        grammar_from_tools_(request.grammar_from_tools),
        completed_(std::move(completed)),
        engine_side_(choices(request)),
        results_(choices(request)) {
    if (request.tools.offered()) {
      for (EngineSide& side : engine_side_) side.tools.emplace(tool_syntax);
    }
  }

  static size_t choices(const CompletionRequest& request) {
    return std::max<size_t>(request.prompts.size(), 1) * static_cast<size_t>(request.n);
  }
  // The listener of choice `index`'s engine job.
  std::shared_ptr<JobListener> listener(int32_t index);
  // How to cancel every job, once they are queued; run when one is refused.
  void set_cancel(std::function<void()> cancel) { cancel_ = std::move(cancel); }

  // Engine thread, which alone uses the tokenizer; the logprobs are made
  // JSON here.
  void on_tokens(int32_t index, std::string_view text, std::span<const TokenLogprobs> logprobs) {
    if (!stream_) return;
    json entries = logprobs.empty() ? json(nullptr) : render(index, logprobs);
    EngineSide& side = engine_side_[static_cast<size_t>(index)];
    if (!side.tools) {
      post_text(index, std::string(text), std::move(entries));
      return;
    }
    post_read(index, side.tools->feed(text), std::move(entries));
  }
  void on_finished(int32_t index, const RequestResult& result) {
    if (result.finish == FinishReason::kFailed) {  // its sampler chain threw
      const bool caller =
          result.error_kind == ErrorKind::kInputRejected || result.error_kind == ErrorKind::kConfig;
      const ApiError e{caller ? 400 : 500,
                       "generation stopped: the sampler chain failed: " + result.error,
                       caller ? "invalid_request_error" : "server_error", "", "sampler_failed"};
      net::post(io_, [self = shared_from_this(), e] { self->refuse(e); });
      return;
    }
    EngineSide& side = engine_side_[static_cast<size_t>(index)];
    if (stream_ && echo_ && !side.echoed) post_text(index, "", nullptr);  // nothing streamed
    if (stream_ && side.tools) post_read(index, side.tools->finish(), nullptr);
    Finished done;
    done.finish = result.finish;
    done.called = side.tools && side.tools->called();
    done.prompt_tokens = static_cast<int64_t>(result.prompt_tokens.size());
    done.completion_tokens = static_cast<int64_t>(result.generated_tokens.size());
    done.first_token_seconds = result.first_token_seconds;
    if (!stream_) {
      done.choice.text = (echo_ ? echo_text(index) : "") + result.text;
      if (side.tools) {
        ToolCallReader::Output read = side.tools->feed(result.text);
        ToolCallReader::Output rest = side.tools->finish();
        read.content += rest.content;
        read.calls.insert(read.calls.end(), rest.calls.begin(), rest.calls.end());
        done.choice.text = std::move(read.content);
        done.choice.tool_calls = std::move(read.calls);
        done.called = !done.choice.tool_calls.empty();
      }
      done.choice.finish = result.finish;
      if (echo_ && !result.prompt_logprobs.empty()) {
        done.choice.logprobs = prompt_logprobs_json(result.prompt_tokens, result.prompt_logprobs,
                                                    piece_of(), side.text_offset);
        append_logprobs(done.choice.logprobs, render(index, result.logprobs));
      } else if (!result.logprobs.empty()) {
        done.choice.logprobs = render(index, result.logprobs);
      }
    }
    net::post(io_, [self = shared_from_this(), index, done = std::move(done)] {
      self->finish(index, done);
    });
  }
  void on_refused(const Error& error, const RequestSettings& settings) {
    net::post(io_, [self = shared_from_this(),
                    e = refused_error(error, settings, grammar_from_tools_)] { self->refuse(e); });
  }

 private:
  struct EngineSide {
    int64_t text_offset = 0;              // code points the logprobs covered so far
    bool echoed = false;                  // the echoed prompt was streamed
    std::optional<ToolCallReader> tools;  // when the request offers tools
    size_t calls_sent = 0;                // streamed tool calls
  };
  struct Finished {
    Choice choice;  // text and logprobs: not streamed only
    FinishReason finish = FinishReason::kNone;
    bool called = false;  // the answer made tool calls
    int64_t prompt_tokens = 0;
    int64_t completion_tokens = 0;
    double first_token_seconds = 0.0;
  };

  // Engine thread.
  PieceOf piece_of() const {
    return [this](int32_t id) { return tokenizer_.piece(id); };
  }
  json render(int32_t index, std::span<const TokenLogprobs> logprobs) {
    return logprobs_json(endpoint_, logprobs, piece_of(),
                         engine_side_[static_cast<size_t>(index)].text_offset);
  }
  // Choice `index`'s prompt as the answer echoes it: its text as sent, or
  // the pieces of the token ids sent.
  std::string echo_text(int32_t index) const {
    const Prompt& p = prompts_[static_cast<size_t>(index / n_)];
    return p.ids.empty() ? p.text : tokenizer_.decode(p.ids);
  }
  // Streams `text`, after the echoed prompt when it is the choice's first.
  void post_text(int32_t index, std::string text, json entries) {
    EngineSide& side = engine_side_[static_cast<size_t>(index)];
    if (echo_ && !side.echoed) {
      side.echoed = true;
      text = echo_text(index) + text;
    }
    net::post(io_, [self = shared_from_this(), index, piece = std::move(text),
                    entries = std::move(entries)] { self->send(index, piece, entries); });
  }

  // Streams what the tool-call reader told of choice `index`'s text: the
  // content (with the logprobs of the tokens read, even when it is empty),
  // then the calls.
  void post_read(int32_t index, ToolCallReader::Output read, json entries) {
    EngineSide& side = engine_side_[static_cast<size_t>(index)];
    if (!read.content.empty() || !entries.is_null())
      post_text(index, std::move(read.content), std::move(entries));
    if (read.calls.empty()) return;
    const size_t first = side.calls_sent;
    side.calls_sent += read.calls.size();
    net::post(io_, [self = shared_from_this(), index, first, calls = std::move(read.calls)] {
      if (self->exchange_->closed() || self->refused_) return;
      self->begin_stream();
      self->exchange_->stream_write(stream_tool_calls_event(self->completed_, index, first, calls));
    });
  }

  // Connection thread.
  void begin_stream() {
    if (started_) return;
    started_ = true;
    metrics_.count_response(200);
    http::fields headers;
    headers.set(http::field::content_type, "text/event-stream");
    exchange_->start_stream(http::status::ok, headers);
    if (endpoint_ == Endpoint::kChatCompletions) {
      for (size_t i = 0; i < results_.size(); ++i)
        exchange_->stream_write(stream_role_event(completed_, static_cast<int32_t>(i)));
    }
  }

  void send(int32_t index, const std::string& piece, const json& logprobs) {
    if (exchange_->closed() || refused_) return;
    begin_stream();
    exchange_->stream_write(stream_text_event(endpoint_, completed_, index, piece, logprobs));
  }

  void finish(int32_t index, const Finished& done) {
    if (refused_) return;
    results_[static_cast<size_t>(index)] = done;
    if (stream_ && !exchange_->closed() && done.finish != FinishReason::kCancelled) {
      begin_stream();
      exchange_->stream_write(
          stream_finish_event(endpoint_, completed_, index, done.finish, done.called));
    }
    if (++finished_ < results_.size()) return;
    // Every choice is done.
    Usage usage;
    bool cancelled = false;
    double first_token = 0.0;
    for (size_t i = 0; i < results_.size(); ++i) {
      const Finished& r = *results_[i];
      if (i % static_cast<size_t>(n_) == 0) usage.prompt_tokens += r.prompt_tokens;
      usage.completion_tokens += r.completion_tokens;
      cancelled = cancelled || r.finish == FinishReason::kCancelled;
      first_token = i == 0 ? r.first_token_seconds : std::min(first_token, r.first_token_seconds);
    }
    exchange_->record(completed_.id, usage, first_token,
                      cancelled ? FinishReason::kCancelled : results_.front()->finish);
    if (exchange_->closed()) return;
    const ApiError stopped{503, "the server is shutting down and ended this request; retry it",
                           "server_error", "", "shutting_down"};
    if (!stream_) {
      if (cancelled) {
        reply(stopped);
        return;
      }
      std::vector<Choice> choices;
      for (const std::optional<Finished>& r : results_) choices.push_back(r->choice);
      metrics_.count_response(200);
      HttpResponse response(http::status::ok, 11);
      response.set(http::field::content_type, kJson);
      response.body() = dump(completion_json(endpoint_, completed_, choices, usage));
      exchange_->reply(std::move(response));
      return;
    }
    begin_stream();
    if (cancelled) {
      exchange_->stream_write(stream_error_event(stopped));
    } else if (include_usage_) {
      exchange_->stream_write(stream_usage_event(endpoint_, completed_, usage));
    }
    exchange_->stream_write(kStreamDone);
    exchange_->end_stream();
  }

  // The first refusal answers the request (the other choices are
  // cancelled); a stream already begun ends with it as an error event.
  void refuse(const ApiError& e) {
    if (refused_) return;
    refused_ = true;
    if (cancel_) cancel_();
    if (exchange_->closed()) return;
    if (started_) {
      exchange_->stream_write(stream_error_event(e));
      exchange_->stream_write(kStreamDone);
      exchange_->end_stream();
      return;
    }
    reply(e);
  }

  void reply(const ApiError& e) {
    metrics_.count_response(e.status);
    HttpResponse response(static_cast<http::status>(e.status), 11);
    response.set(http::field::content_type, kJson);
    response.body() = error_body(e);
    exchange_->reply(std::move(response));
  }

  net::io_context& io_;
  const std::shared_ptr<LoggedExchange> exchange_;
  ServeMetrics& metrics_;
  const Tokenizer& tokenizer_;
  const Endpoint endpoint_;
  const bool stream_;
  const bool include_usage_;
  const bool echo_;
  const std::vector<Prompt> prompts_;  // completions; choice i answers prompt i / n
  const int32_t n_;
  const bool grammar_from_tools_;  // a grammar refusal names "tools"
  const Completed completed_;
  std::function<void()> cancel_;
  std::vector<EngineSide> engine_side_;           // engine thread
  std::vector<std::optional<Finished>> results_;  // connection thread, by choice
  size_t finished_ = 0;
  bool started_ = false;
  bool refused_ = false;
};

// Choice `index` of a RequestRun, as the engine sees it.
class ChoiceListener final : public JobListener {
 public:
  ChoiceListener(std::shared_ptr<RequestRun> run, int32_t index)
      : run_(std::move(run)), index_(index) {}
  void on_tokens(std::string_view text, std::span<const TokenLogprobs> logprobs) override {
    run_->on_tokens(index_, text, logprobs);
  }
  void on_finished(const RequestResult& result) override { run_->on_finished(index_, result); }
  void on_refused(const Error& error, const RequestSettings& settings) override {
    run_->on_refused(error, settings);
  }

 private:
  const std::shared_ptr<RequestRun> run_;
  const int32_t index_;
};

std::shared_ptr<JobListener> RequestRun::listener(int32_t index) {
  return std::make_shared<ChoiceListener>(shared_from_this(), index);
}

// Lists the request fields the server did not use: "user, foo".
constexpr const char* kIgnoredFieldsHeader = "Duet-Ignored-Fields";

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

const char* target_of(Endpoint endpoint) {
  return endpoint == Endpoint::kCompletions ? "/v1/completions" : "/v1/chat/completions";
}

ApiError not_found(const std::string& method, const std::string& target) {
  return ApiError{404,
                  "no route " + method + " " + target +
                      "; the routes are POST /v1/completions, POST /v1/chat/completions, "
                      "GET /v1/models, GET /health, GET /metrics",
                  "invalid_request_error", "", "not_found"};
}

// "prompt: 3000 tokens, and the KV cache holds 2048 ..." for `ids` that
// leave no room for a generated token.
void check_fits(const std::vector<int32_t>& ids, int64_t capacity, const char* field) {
  if (static_cast<int64_t>(ids.size()) < capacity) return;
  throw Error(ErrorKind::kInputRejected,
              std::string(field) + ": " + std::to_string(ids.size()) +
                  " tokens, and the KV cache holds " + std::to_string(capacity) +
                  " positions in all, which must leave room for a generated token; shorten it "
                  "(or raise components.kv_cache.capacity_tokens)");
}

}  // namespace

ServeHandler::ServeHandler(net::io_context& io, const Pipeline& pipeline,
                           const PipelineConfig& config, ServeEngine& engine, ServeMetrics& metrics,
                           ServedModel model, const ChatTemplate* chat, std::string chat_error,
                           ServeOptions options)
    : io_(io),
      pipeline_(pipeline),
      config_(config),
      engine_(engine),
      metrics_(metrics),
      model_(std::move(model)),
      chat_(chat),
      chat_error_(std::move(chat_error)),
      options_(std::move(options)) {}

HttpResponse ServeHandler::respond(http::status status, std::string body,
                                   const std::string& content_type, unsigned version) const {
  metrics_.count_response(static_cast<int>(status));
  HttpResponse response(status, version);
  response.set(http::field::content_type, content_type);
  response.body() = std::move(body);
  return response;
}

HttpResponse ServeHandler::error_response(const ApiError& error, unsigned version) const {
  return respond(static_cast<http::status>(error.status), error_body(error), kJson, version);
}

HttpResponse ServeHandler::unreadable(http::status status, const std::string& message) {
  return error_response(
      ApiError{static_cast<int>(status), message, "invalid_request_error", "", "invalid_request"},
      11);
}

bool ServeHandler::authorized(const HttpRequest& request) const {
  if (options_.api_key.empty()) return true;
  const auto it = request.find(http::field::authorization);
  if (it == request.end()) return false;
  // Every byte compared whatever the first difference, so that the time
  // taken says nothing about how much of a guess was right.
  const std::string expected = "Bearer " + options_.api_key;
  const boost::beast::string_view given = it->value();
  unsigned char differ = given.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < expected.size(); ++i)
    differ |= static_cast<unsigned char>(expected[i] ^ (i < given.size() ? given[i] : 0));
  return differ == 0;
}

void ServeHandler::handle(const HttpRequest& request, std::shared_ptr<HttpExchange> exchange) {
  AccessEntry entry;
  entry.time = SystemClock::now();
  entry.method = std::string(request.method_string());
  entry.target = std::string(request.target());
  if (const size_t q = entry.target.find('?'); q != std::string::npos) entry.target.erase(q);
  auto logged =
      std::make_shared<LoggedExchange>(std::move(exchange), std::move(entry), options_.access_log);
  try {
    route(request, logged);
  } catch (const std::exception& e) {
    logged->reply(error_response(
        ApiError{500, std::string("internal error: ") + e.what() + " (please report this)",
                 "server_error", "", "internal_error"},
        request.version()));
  }
}

void ServeHandler::route(const HttpRequest& request,
                         const std::shared_ptr<LoggedExchange>& exchange) {
  std::string target(request.target());
  if (const size_t q = target.find('?'); q != std::string::npos) target.erase(q);
  const std::string method(request.method_string());
  const unsigned version = request.version();
  struct Route {
    const char* path;
    http::verb verb;
  };
  static const Route kRoutes[] = {{"/v1/completions", http::verb::post},
                                  {"/v1/chat/completions", http::verb::post},
                                  {"/v1/models", http::verb::get},
                                  {"/health", http::verb::get},
                                  {"/metrics", http::verb::get}};
  const Route* route = nullptr;
  for (const Route& r : kRoutes) {
    if (target == r.path) route = &r;
  }
  // Browsers send Origin with every cross-site request (and with a POST of
  // any page): a page not allowed gets nothing here, so that no web page can
  // spend the server's compute or read its answers.
  if (const auto origin = request.find(http::field::origin); origin != request.end()) {
    const std::string from(origin->value());
    if (!origin_allowed(from)) {
      exchange->reply(error_response(
          ApiError{403,
                   "origin '" + from +
                       "' is not allowed to call this server; start it with --allowed-origins " +
                       from + " to let that site's pages use it",
                   "invalid_request_error", "", "origin_not_allowed"},
          version));
      return;
    }
    const bool any = std::find(options_.allowed_origins.begin(), options_.allowed_origins.end(),
                               "*") != options_.allowed_origins.end();
    exchange->set_header(http::field::access_control_allow_origin, any ? "*" : from);
    exchange->set_header(http::field::vary, "Origin");
    exchange->set_header(http::field::access_control_expose_headers, kIgnoredFieldsHeader);
  }
  if (route == nullptr) {
    exchange->reply(error_response(not_found(method, target), version));
    return;
  }
  const std::string allowed =
      route->verb == http::verb::get ? "GET, HEAD, OPTIONS" : "POST, OPTIONS";
  if (request.method() == http::verb::options) {  // a CORS preflight, or a question
    HttpResponse response(http::status::no_content, version);
    response.set(http::field::allow, allowed);
    if (request.find(http::field::origin) != request.end()) {
      response.set(http::field::access_control_allow_methods, allowed);
      response.set(http::field::access_control_allow_headers, "Authorization, Content-Type");
      response.set(http::field::access_control_max_age, "600");
    }
    metrics_.count_response(204);
    exchange->reply(std::move(response));
    return;
  }
  const bool head = request.method() == http::verb::head && route->verb == http::verb::get;
  if (request.method() != route->verb && !head) {
    HttpResponse response = error_response(
        ApiError{405, "method " + method + " is not allowed on " + target + "; use " + allowed,
                 "invalid_request_error", "", "method_not_allowed"},
        version);
    response.set(http::field::allow, allowed);
    exchange->reply(std::move(response));
    return;
  }
  if (target == "/health") {
    const bool ok = !draining_ && engine_.healthy();
    const char* status = ok ? "ok" : (draining_ ? "shutting_down" : "failed");
    exchange->reply(respond(ok ? http::status::ok : http::status::service_unavailable,
                            dump({{"status", status}}), kJson, version));
    return;
  }
  if (target == "/metrics") {
    exchange->reply(respond(http::status::ok, metrics_.render(),
                            "text/plain; version=0.0.4; charset=utf-8", version));
    return;
  }
  if (!authorized(request)) {
    HttpResponse response = error_response(
        ApiError{401,
                 "missing or wrong API key; send the header 'Authorization: Bearer KEY' with the "
                 "key the server was started with (--api-key)",
                 "invalid_request_error", "", "invalid_api_key"},
        version);
    response.set(http::field::www_authenticate, "Bearer");
    exchange->reply(std::move(response));
    return;
  }
  if (target == "/v1/models") {
    const nlohmann::json models = {{"object", "list"},
                                   {"data", nlohmann::json::array({{{"id", model_.id},
                                                                    {"object", "model"},
                                                                    {"created", model_.created},
                                                                    {"owned_by", "duet"}}})}};
    exchange->reply(respond(http::status::ok, dump(models), kJson, version));
    return;
  }
  complete(target == "/v1/completions" ? Endpoint::kCompletions : Endpoint::kChatCompletions,
           request, exchange);
}

bool ServeHandler::origin_allowed(const std::string& origin) const {
  for (const std::string& allowed : options_.allowed_origins) {
    if (allowed == "*" || allowed == origin) return true;
  }
  return false;
}

void ServeHandler::complete(Endpoint endpoint, const HttpRequest& request,
                            std::shared_ptr<LoggedExchange> exchange) {
  const unsigned version = request.version();
  if (draining_ || !engine_.healthy()) {
    exchange->reply(error_response(
        ApiError{503,
                 draining_ ? "the server is shutting down; send the request to another replica"
                           : "the server stopped generating after an error; restart it",
                 "server_error", "", draining_ ? "shutting_down" : "engine_failed"},
        version));
    return;
  }
  if (const int64_t waiting = engine_.queued(); waiting >= options_.max_queue) {
    HttpResponse response = error_response(
        ApiError{429,
                 std::to_string(waiting) + " requests are waiting, the limit (--max-queue) is " +
                     std::to_string(options_.max_queue) + "; retry after a second",
                 "rate_limit_error", "", "queue_full"},
        version);
    response.set(http::field::retry_after, "1");
    exchange->reply(std::move(response));
    return;
  }
  if (endpoint == Endpoint::kChatCompletions && !chat_) {
    exchange->reply(error_response(
        ApiError{400, chat_error_, "invalid_request_error", "messages", "no_chat_template"},
        version));
    return;
  }
  CompletionRequest parsed;
  try {
    parsed = parse_completion_request(endpoint, request.body(), model_);
  } catch (const ApiError& e) {
    exchange->reply(error_response(e, version));
    return;
  }
  if (parsed.stream && version < 11) {
    exchange->reply(error_response(
        ApiError{400,
                 "stream: a streamed answer needs HTTP/1.1 (chunked); this request is HTTP/1.0",
                 "invalid_request_error", "stream", "invalid_value"},
        version));
    return;
  }
  const uint64_t serial = next_response_++;
  Completed completed{(endpoint == Endpoint::kCompletions ? "cmpl-duet-" : "chatcmpl-duet-") +
                          std::to_string(serial),
                      static_cast<int64_t>(std::time(nullptr)), model_.id};
  exchange->record_id(completed.id);
  if (!parsed.ignored_fields.empty())
    exchange->set_header(kIgnoredFieldsHeader, joined(parsed.ignored_fields));
  if (!parsed.unknown_fields.empty()) {
    std::cerr << "duet serve: warning: " << completed.id << " (" << target_of(endpoint)
              << "): ignored unknown field(s) " << joined(parsed.unknown_fields)
              << " (docs/serve.md lists the fields; --strict-fields refuses unknown ones)"
              << std::endl;
  }
  auto run = std::make_shared<RequestRun>(io_, exchange, metrics_, parsed, std::move(completed),
                                          pipeline_.tokenizer(), model_.tool_syntax);
  // One engine job per choice: choice i answers prompt i / n, and the
  // siblings of one prompt draw with seeds seed, seed + 1, ...
  auto ids = std::make_shared<std::vector<uint64_t>>();
  const auto choices = static_cast<int32_t>(RequestRun::choices(parsed));
  for (int32_t i = 0; i < choices; ++i) {
    RequestSettings settings = parsed.settings;
    if (parsed.n > 1)
      settings.seed = settings.seed.value_or(model_.seed) + static_cast<uint64_t>(i % parsed.n);
    ids->push_back(engine_.enqueue(
        Job{tokenizer_for(parsed, static_cast<size_t>(i / parsed.n)), settings, run->listener(i)}));
  }
  ServeEngine& engine = engine_;
  const auto cancel_all = [&engine, ids] {
    for (const uint64_t id : *ids) engine.cancel(id);
  };
  run->set_cancel(cancel_all);
  exchange->on_close(cancel_all);
}

std::function<std::vector<int32_t>()> ServeHandler::tokenizer_for(const CompletionRequest& request,
                                                                  size_t prompt) const {
  const int64_t capacity = config_.kv_cache.capacity_tokens;
  const Tokenizer& tokenizer = pipeline_.tokenizer();
  if (request.endpoint == Endpoint::kChatCompletions) {
    std::optional<std::string> system;
    if (!config_.model.system_prompt.empty()) system = config_.model.system_prompt;
    std::string tools = request.tools.offered() ? request.tools.tools : "";
    return [&tokenizer, &chat = *chat_, system, messages = request.messages,
            tools = std::move(tools), capacity] {
      std::vector<int32_t> ids = tokenize_messages(tokenizer, chat, system, messages, tools);
      check_fits(ids, capacity, "messages");
      return ids;
    };
  }
  const Prompt& p = request.prompts.at(prompt);
  if (!p.ids.empty()) {
    return [ids = p.ids, capacity] {
      check_fits(ids, capacity, "prompt");
      return ids;
    };
  }
  return [&tokenizer, text = p.text, capacity, special = !options_.literal_prompts] {
    std::vector<int32_t> ids;
    if (tokenizer.add_bos() && tokenizer.bos_id()) ids.push_back(*tokenizer.bos_id());
    const std::vector<int32_t> more = tokenizer.encode(text, special);
    ids.insert(ids.end(), more.begin(), more.end());
    check_fits(ids, capacity, "prompt");
    return ids;
  };
}

}  // namespace duet::serve
