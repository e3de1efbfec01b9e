// http_server.h — a small HTTP/1.1 server on Boost.Beast: keep-alive
// connections, bounded request sizes, idle and write timeouts, responses
// whole or streamed (chunked), and word of a client that went away while its
// response was being made. It knows nothing of what the requests mean: a
// handler does. Everything here runs on the one thread that runs the
// io_context; no call is thread-safe.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

namespace duet::serve {

namespace http = boost::beast::http;
using HttpRequest = http::request<http::string_body>;
using HttpResponse = http::response<http::string_body>;

struct HttpLimits {
  size_t max_body_bytes = 1 << 20;  // a longer body is refused
  size_t max_header_bytes = 16384;
  // A connection that takes longer than this to send a whole request, or
  // sends none, is closed.
  std::chrono::milliseconds read_timeout{30000};
  // A client that takes longer than this to take one write of a response is
  // dropped (its exchange closes).
  std::chrono::milliseconds write_timeout{30000};
};

// One request's answer. Give exactly one of reply() and a stream
// (start_stream, stream_write..., end_stream). While the answer is being
// made, the server watches the connection: when the client closes it or the
// connection fails, closed() turns true and the on_close callback runs once;
// later calls do nothing.
class HttpExchange {
 public:
  virtual ~HttpExchange() = default;
  virtual void reply(HttpResponse response) = 0;
  // Sends the status line and `headers` (Content-Type among them) of a
  // chunked response; the body follows in stream_write() calls.
  virtual void start_stream(http::status status, const http::fields& headers) = 0;
  virtual void stream_write(std::string data) = 0;
  virtual void end_stream() = 0;
  virtual bool closed() const = 0;
  virtual void on_close(std::function<void()> callback) = 0;
};

class HttpHandler {
 public:
  virtual ~HttpHandler() = default;
  // Answers `request` through `exchange`, now or later.
  virtual void handle(const HttpRequest& request, std::shared_ptr<HttpExchange> exchange) = 0;
  // The response for a request the server could not read (`status` 400):
  // `message` says why; the connection closes after it.
  virtual HttpResponse unreadable(http::status status, const std::string& message) = 0;
};

class HttpServer {
 public:
  // Listens on `host`:`port` (0 picks a free port). Throws duet::Error(kUsage)
  // naming the address when it cannot listen.
  HttpServer(boost::asio::io_context& io, const std::string& host, uint16_t port,
             HttpHandler& handler, HttpLimits limits);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  void start();
  // The port listened on.
  uint16_t port() const;
  // Stops accepting connections; those open go on, and each closes after
  // its current answer.
  void stop_accepting();
  // Exchanges whose answer is not yet complete.
  size_t active_exchanges() const;
  // Closes every connection now.
  void close_all();

  class Connection;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace duet::serve
