// serve_handler.h — the routes of `duet serve` (docs/serve.md): the OpenAI
// endpoints onto the engine, /health, /metrics, and the errors of the HTTP
// layer as OpenAI error objects. Runs on the connection thread.
#pragma once

#include <boost/asio/io_context.hpp>
#include <string>

#include "access_log.h"
#include "duet/app/chat_template.h"
#include "duet/app/pipeline.h"
#include "http_server.h"
#include "serve_engine.h"
#include "serve_metrics.h"
#include "serve_openai.h"

namespace duet::serve {

struct ServeOptions {
  std::string api_key;  // empty: no key asked for
  // A request that finds this many waiting beyond the batch's free places
  // (ServeEngine::queued) gets 429.
  int64_t max_queue = 128;
  // /v1/completions text prompts: false parses control-token spellings
  // ("<|im_end|>") into their tokens, as vLLM and llama-server do; true
  // keeps them as text (--literal-prompts). Chat message contents are never
  // parsed.
  bool literal_prompts = false;
  // One line per answered request on stderr (access_log.h).
  AccessLogFormat access_log = AccessLogFormat::kText;
  // The origins ("scheme://host[:port]", exactly as browsers send Origin,
  // or "*" for any) whose pages may call the server: a request with another
  // Origin header gets 403, one from an allowed origin CORS headers.
  // Empty: every request with an Origin header is refused.
  std::vector<std::string> allowed_origins;
};

class LoggedExchange;

class ServeHandler final : public HttpHandler {
 public:
  // `chat` is the model's chat template, or null with `chat_error` saying
  // why the model has none (then /v1/chat/completions answers 400). The
  // references must outlive the handler, and `pipeline`, `config` and `chat`
  // the engine too (its thread tokenizes with them).
  ServeHandler(boost::asio::io_context& io, const Pipeline& pipeline, const PipelineConfig& config,
               ServeEngine& engine, ServeMetrics& metrics, ServedModel model,
               const ChatTemplate* chat, std::string chat_error, ServeOptions options);

  void handle(const HttpRequest& request, std::shared_ptr<HttpExchange> exchange) override;
  HttpResponse unreadable(http::status status, const std::string& message) override;

  // From now on completions get 503 and /health reports it.
  void stop_taking_requests() { draining_ = true; }

 private:
  // A response with `body`, counted in the metrics.
  HttpResponse respond(http::status status, std::string body, const std::string& content_type,
                       unsigned version) const;
  HttpResponse error_response(const ApiError& error, unsigned version) const;
  void route(const HttpRequest& request, const std::shared_ptr<LoggedExchange>& exchange);
  bool origin_allowed(const std::string& origin) const;
  // Whether `request` may use /v1 (the API key, when one is set).
  bool authorized(const HttpRequest& request) const;
  void complete(Endpoint endpoint, const HttpRequest& request,
                std::shared_ptr<LoggedExchange> exchange);
  // The job that tokenizes `request`'s messages, or its prompt number
  // `prompt`, on the engine thread.
  std::function<std::vector<int32_t>()> tokenizer_for(const CompletionRequest& request,
                                                      size_t prompt) const;

  boost::asio::io_context& io_;
  const Pipeline& pipeline_;
  const PipelineConfig& config_;
  ServeEngine& engine_;
  ServeMetrics& metrics_;
  const ServedModel model_;
  const ChatTemplate* const chat_;
  const std::string chat_error_;
  const ServeOptions options_;
  bool draining_ = false;
  uint64_t next_response_ = 1;  // numbers the completions' ids
};

}  // namespace duet::serve
