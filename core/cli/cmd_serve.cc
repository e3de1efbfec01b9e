// duet serve — the pipeline behind an OpenAI-compatible HTTP API, every
// connection served by one batching scheduler (docs/serve.md).
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <limits>
#include <optional>

#include "duet/app/chat_template.h"
#include "duet/app/gguf.h"
#include "duet/app/pipeline.h"
#include "duet/error.h"
#include "http_server.h"
#include "pipeline_loading.h"
#include "serve_engine.h"
#include "serve_handler.h"
#include "serve_metrics.h"
#include "subcommands.h"

namespace duet::cli {
namespace {

namespace net = boost::asio;
using Clock = std::chrono::steady_clock;

constexpr const char* kSynopsis =
    "duet serve PIPELINE.yaml|MODEL.gguf [--host 127.0.0.1] [--port 8080] [--api-key KEY] "
    "[--max-queue N] [--strict-fields] [--literal-prompts] [--log-format text|json|none] "
    "[--allowed-origins ORIGIN,...] "
    "[--idle-timeout S] [--shutdown-timeout S] [--set key.path=value]...";
// After the engine drained on a signal: how long answers still being written
// get before every connection closes.
constexpr std::chrono::seconds kFlushTime{2};

int64_t checked(const po::variables_map& vm, const char* flag, int64_t min, int64_t max) {
  const int64_t v = vm[flag].as<int64_t>();
  if (v < min || v > max) {
    throw Error(ErrorKind::kUsage, "duet serve: --" + std::string(flag) + " " + std::to_string(v) +
                                       " is outside [" + std::to_string(min) + ", " +
                                       std::to_string(max) + "]; give a value in that range");
  }
  return v;
}

serve::AccessLogFormat access_log_format(const std::string& name) {
  if (name == "text") return serve::AccessLogFormat::kText;
  if (name == "json") return serve::AccessLogFormat::kJson;
  if (name == "none") return serve::AccessLogFormat::kNone;
  throw Error(ErrorKind::kUsage, "duet serve: --log-format '" + name +
                                     "' is not one of text, json, none; give one of them");
}

// "a, b" -> {"a", "b"}; an origin with a path or a trailing slash can never
// match what a browser sends, so it is refused.
std::vector<std::string> split_origins(const std::string& list) {
  std::vector<std::string> origins;
  size_t at = 0;
  while (at <= list.size()) {
    size_t end = list.find(',', at);
    if (end == std::string::npos) end = list.size();
    std::string one = list.substr(at, end - at);
    one.erase(0, one.find_first_not_of(' '));
    one.erase(one.find_last_not_of(' ') + 1);
    at = end + 1;
    if (one.empty()) continue;
    const size_t scheme = one.find("://");
    if (one != "*" &&
        (scheme == std::string::npos || one.find('/', scheme + 3) != std::string::npos)) {
      throw Error(ErrorKind::kUsage,
                  "duet serve: --allowed-origins: '" + one +
                      "' is not an origin; write it as a browser sends it, scheme://host[:port] "
                      "with no path (https://app.example.com), or * for any");
    }
    origins.push_back(one);
  }
  return origins;
}

// Once the engine has drained: waits (up to kFlushTime) for the answers
// still being written, then closes every connection and stops the loop.
void finish_when_flushed(net::io_context& io, serve::HttpServer& server,
                         std::shared_ptr<net::steady_timer> timer, Clock::time_point until) {
  if (server.active_exchanges() == 0 || Clock::now() >= until) {
    server.close_all();
    io.stop();
    return;
  }
  timer->expires_after(std::chrono::milliseconds(20));
  timer->async_wait([&io, &server, timer, until](const boost::system::error_code&) {
    finish_when_flushed(io, server, timer, until);
  });
}

}  // namespace

int cmd_serve(const std::vector<std::string>& args) {
  po::options_description opts("Options");
  opts.add_options()("help,h", "show this help")(
      "host", po::value<std::string>()->default_value("127.0.0.1"),
      "address to listen on (0.0.0.0 for every interface)")(
      "port", po::value<int64_t>()->default_value(8080), "TCP port (0 picks a free one)")(
      "api-key", po::value<std::string>(),
      "require 'Authorization: Bearer KEY' on /v1 routes (default: $DUET_API_KEY, else none)")(
      "max-queue", po::value<int64_t>()->default_value(128),
      "requests that may wait for a place in the batch; one more gets 429")(
      "idle-timeout", po::value<int64_t>()->default_value(30),
      "seconds a connection may take to send a request (or stay idle between requests), and a "
      "client to take one write of a response")(
      "shutdown-timeout", po::value<int64_t>()->default_value(10),
      "on SIGTERM or SIGINT, seconds running requests get to finish before they are cancelled")(
      "strict-fields",
      "refuse (400) request fields duet serve does not know, instead of ignoring them and naming "
      "them in the Duet-Ignored-Fields header and a warning line")(
      "log-format", po::value<std::string>()->default_value("text"),
      "the access log, one line per request on stderr: text, json or none")(
      "allowed-origins", po::value<std::string>()->default_value(""),
      "comma-separated origins (https://app.example.com) whose web pages may call the server, "
      "or * for any; a request from any other Origin gets 403")(
      "literal-prompts",
      "tokenize /v1/completions text prompts as plain text: control-token spellings such as "
      "<|im_end|> stay text (default: they become their tokens, as in vLLM and llama-server)");
  add_pipeline_options(opts);
  po::variables_map vm;
  if (!parse_command_line("serve", kSynopsis, opts, {"pipeline"}, args, vm)) return 0;
  const auto port = static_cast<uint16_t>(checked(vm, "port", 0, 65535));
  serve::ServeOptions options;
  options.max_queue = checked(vm, "max-queue", 1, 1 << 20);
  options.literal_prompts = vm.count("literal-prompts") != 0;
  options.access_log = access_log_format(vm["log-format"].as<std::string>());
  options.allowed_origins = split_origins(vm["allowed-origins"].as<std::string>());
  const std::chrono::seconds idle(checked(vm, "idle-timeout", 1, 3600));
  const std::chrono::seconds grace(checked(vm, "shutdown-timeout", 0, 3600));
  if (vm.count("api-key")) {
    options.api_key = vm["api-key"].as<std::string>();
    if (options.api_key.empty())
      throw Error(ErrorKind::kUsage, "duet serve: --api-key is empty; give a key or leave it out");
  } else if (const char* key = std::getenv("DUET_API_KEY"); key != nullptr) {
    options.api_key = key;
  }
  const std::string host = vm["host"].as<std::string>();

  PluginHost& plugins = cli_plugin_host();
  const PipelineConfig config = load_pipeline(vm, plugins);
  if (config.stages.size() < 2) {
    // A scoring pipeline (prefill alone) would answer every request with
    // nothing; the server's scoring is a completion's echo and logprobs.
    throw Error(ErrorKind::kConfig,
                "duet serve: this pipeline's stages are [" + config.stages.front().name +
                    "], which score prompts and generate nothing; add a decode stage after "
                    "prefill (e.g. '- decode: {max_new_tokens: 128}')");
  }
  auto pipeline = Pipeline::build(config, plugins);
  std::optional<ChatTemplate> chat;
  std::string chat_error;
  try {
    chat = ChatTemplate::from_model(GgufFile::open(config.model.path), config.model.chat_template);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kConfig) throw;
    chat_error = std::string("messages: ") + e.what();
  }
  serve::ServedModel model;
  model.id = config.model.path.stem().string();
  model.chain = config.sampler.chain;
  model.n_vocab = pipeline->check().hparams.n_vocab;
  model.created = static_cast<int64_t>(std::time(nullptr));
  model.strict_fields = vm.count("strict-fields") != 0;
  model.seed = config.sampler.seed;
  if (chat) model.tool_syntax = chat->tool_syntax();

  serve::ServeMetrics metrics;
  net::io_context io;
  // Throws kConfig when the pipeline cannot batch.
  serve::ServeEngine engine(*pipeline, config.batching.max_sequences, metrics);
  serve::ServeHandler handler(io, *pipeline, config, engine, metrics, model,
                              chat ? &*chat : nullptr, chat_error, options);
  serve::HttpLimits limits;
  limits.read_timeout = idle;
  limits.write_timeout = idle;
  serve::HttpServer server(io, host, port, handler, limits);
  server.start();

  net::signal_set signals(io, SIGINT, SIGTERM);
  bool stopping = false;
  std::function<void(const boost::system::error_code&, int)> on_signal =
      [&](const boost::system::error_code& ec, int signal) {
        if (ec) return;
        if (stopping) {
          std::cerr << "duet serve: second signal, stopping now\n";
          io.stop();
          return;
        }
        stopping = true;
        std::cerr << "duet serve: " << (signal == SIGINT ? "SIGINT" : "SIGTERM")
                  << ": no new requests; running ones get " << grace.count()
                  << " s to finish, then are cancelled\n";
        handler.stop_taking_requests();
        server.stop_accepting();
        engine.shut_down(Clock::now() + grace, [&io, &server] {
          net::post(io, [&io, &server] {
            finish_when_flushed(io, server, std::make_shared<net::steady_timer>(io),
                                Clock::now() + kFlushTime);
          });
        });
        signals.async_wait(on_signal);
      };
  signals.async_wait(on_signal);

  std::cerr << "duet serve: listening on http://" << host << ":" << server.port() << " (model "
            << model.id << ", backend " << pipeline->check().backend << ", "
            << config.batching.max_sequences << " sequences at once, "
            << config.kv_cache.capacity_tokens << "-token KV cache"
            << (pipeline->check().window_cache.n_layers > 0
                    ? ", sliding-window layers in rings, prefixes not shared"
                    : "")
            << (options.api_key.empty() ? "" : ", API key required") << ")" << std::endl;
  io.run();
  std::cerr << "duet serve: stopped" << std::endl;
  return 0;
}

}  // namespace duet::cli
