#include "http_server.h"

#include <algorithm>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <cstdio>
#include <optional>
#include <vector>

#include "duet/error.h"

namespace duet::serve {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
using tcp = net::ip::tcp;

// Bytes a client may send past its request while the answer is being made
// (a pipelined request); beyond this the connection is no longer watched.
constexpr size_t kMaxPipelinedBytes = 65536;
// How long a closing connection keeps reading what the client still sends,
// so that the client reads the last answer before the connection resets.
constexpr std::chrono::seconds kLingerTime{2};

bool is_http_error(const beast::error_code& ec) {
  return &ec.category() == &http::make_error_code(http::error::end_of_stream).category();
}

std::string chunk(const std::string& data) {
  char size[20];
  std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  return size + data + "\r\n";
}

}  // namespace

class Exchange;

struct HttpServer::State {
  State(net::io_context& context, HttpHandler& h, HttpLimits l)
      : io(context), acceptor(context), retry(context), handler(h), limits(l) {}
  net::io_context& io;
  tcp::acceptor acceptor;
  net::steady_timer retry;  // after a failed accept
  HttpHandler& handler;
  const HttpLimits limits;
  bool draining = false;
  size_t active = 0;
  std::vector<std::weak_ptr<Connection>> connections;
};

class HttpServer::Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, std::shared_ptr<State> state)
      : stream_(std::move(socket)), state_(std::move(state)) {}

  void start() {
    beast::error_code ignored;
    stream_.socket().set_option(tcp::no_delay(true), ignored);
    read_request();
  }

  // Closes now; an answer in the making is told its client went away.
  void close_now();
  // Closes when idle (between requests); an answer in the making closes the
  // connection when it is complete.
  void close_when_idle() {
    if (!answering_) close_now();
  }

  void reply(uint64_t serial, HttpResponse response);
  void start_stream(uint64_t serial, http::status status, const http::fields& headers);
  void stream_write(uint64_t serial, std::string data);
  void end_stream(uint64_t serial);

 private:
  bool current(uint64_t serial) const { return serial == serial_ && answering_ && !broken_; }
  bool keep_alive() const { return keep_alive_ && !state_->draining; }
  void read_request();
  void read_body();
  void on_request(beast::error_code ec);
  void refuse_unreadable(const std::string& message);
  void watch();
  void on_watch(beast::error_code ec, size_t bytes);
  void write_whole(HttpResponse response);
  void on_answer_written(beast::error_code ec);
  void flush_stream();
  void fail();
  void finish_exchange();
  void close_gracefully();
  void drain();

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::shared_ptr<State> state_;
  std::weak_ptr<Exchange> exchange_;
  uint64_t serial_ = 0;  // of the current exchange
  bool answering_ = false;
  bool answer_given_ = false;
  bool keep_alive_ = true;
  bool watching_ = false;
  bool writing_ = false;
  bool stream_ended_ = false;
  bool closing_ = false;
  bool broken_ = false;
  std::shared_ptr<HttpResponse> response_;
  std::optional<http::response<http::empty_body>> stream_head_;
  std::optional<http::response_serializer<http::empty_body>> head_serializer_;
  std::string pending_;
  std::string inflight_;
};

class Exchange final : public HttpExchange {
 public:
  Exchange(std::shared_ptr<HttpServer::Connection> connection, uint64_t serial)
      : connection_(std::move(connection)), serial_(serial) {}
  void reply(HttpResponse response) override { connection_->reply(serial_, std::move(response)); }
  void start_stream(http::status status, const http::fields& headers) override {
    connection_->start_stream(serial_, status, headers);
  }
  void stream_write(std::string data) override {
    connection_->stream_write(serial_, std::move(data));
  }
  void end_stream() override { connection_->end_stream(serial_); }
  bool closed() const override { return closed_; }
  void on_close(std::function<void()> callback) override {
    if (closed_) {
      callback();
    } else {
      callback_ = std::move(callback);
    }
  }
  void mark_closed() {
    if (closed_) return;
    closed_ = true;
    if (auto callback = std::move(callback_)) callback();
  }

 private:
  std::shared_ptr<HttpServer::Connection> connection_;
  const uint64_t serial_;
  bool closed_ = false;
  std::function<void()> callback_;
};

void HttpServer::Connection::read_request() {
  if (broken_ || closing_) return;
  if (state_->draining) {
    close_now();
    return;
  }
  parser_.emplace();
  parser_->body_limit(state_->limits.max_body_bytes);
  parser_->header_limit(static_cast<uint32_t>(state_->limits.max_header_bytes));
  // One deadline for the headers, a 100 Continue and the body together.
  stream_.expires_after(state_->limits.read_timeout);
  http::async_read_header(stream_, buffer_, *parser_,
                          [self = shared_from_this()](beast::error_code ec, size_t) {
                            if (ec) {
                              self->on_request(ec);
                            } else {
                              self->read_body();
                            }
                          });
}

void HttpServer::Connection::read_body() {
  const auto read = [self = shared_from_this()] {
    http::async_read(self->stream_, self->buffer_, *self->parser_,
                     [self](beast::error_code ec, size_t) { self->on_request(ec); });
  };
  const auto expect = parser_->get().find(http::field::expect);
  if (expect == parser_->get().end() || !beast::iequals(expect->value(), "100-continue") ||
      parser_->is_done()) {
    read();
    return;
  }
  // curl, for one, waits a second for this before it sends a long body.
  static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
  net::async_write(stream_, net::buffer(kContinue),
                   [self = shared_from_this(), read](beast::error_code ec, size_t) {
                     if (ec) {
                       self->close_now();
                     } else {
                       read();
                     }
                   });
}

void HttpServer::Connection::on_request(beast::error_code ec) {
  if (ec == http::error::end_of_stream || (ec && !is_http_error(ec))) {
    close_now();  // the client closed, the read timed out, or the socket failed
    return;
  }
  if (ec == http::error::body_limit) {
    refuse_unreadable("the request body is over the limit of " +
                      std::to_string(state_->limits.max_body_bytes) + " bytes; send less");
    return;
  }
  if (ec == http::error::header_limit) {
    refuse_unreadable("the request headers are over the limit of " +
                      std::to_string(state_->limits.max_header_bytes) + " bytes; send fewer");
    return;
  }
  if (ec) {
    refuse_unreadable("not a valid HTTP/1.1 request (" + ec.message() + ")");
    return;
  }
  HttpRequest request = parser_->release();
  keep_alive_ = request.keep_alive();
  ++serial_;
  answering_ = true;
  answer_given_ = false;
  stream_ended_ = false;
  ++state_->active;
  auto exchange = std::make_shared<Exchange>(shared_from_this(), serial_);
  exchange_ = exchange;
  watch();
  state_->handler.handle(request, std::move(exchange));
}

void HttpServer::Connection::refuse_unreadable(const std::string& message) {
  keep_alive_ = false;
  HttpResponse response = state_->handler.unreadable(http::status::bad_request, message);
  ++serial_;
  answering_ = true;
  answer_given_ = true;
  ++state_->active;
  write_whole(std::move(response));
}

void HttpServer::Connection::watch() {
  if (watching_ || broken_) return;
  watching_ = true;
  stream_.expires_never();
  stream_.async_read_some(buffer_.prepare(4096),
                          [self = shared_from_this()](beast::error_code ec, size_t bytes) {
                            self->on_watch(ec, bytes);
                          });
}

void HttpServer::Connection::on_watch(beast::error_code ec, size_t bytes) {
  watching_ = false;
  if (broken_) return;
  if (closing_) {
    drain();
    return;
  }
  if (!ec) {
    buffer_.commit(bytes);
    if (!answering_) {
      read_request();
    } else if (buffer_.size() < kMaxPipelinedBytes) {
      watch();
    }
    return;
  }
  if (ec == net::error::operation_aborted) {
    read_request();  // cancelled once the answer was written: the next request
    return;
  }
  fail();
}

void HttpServer::Connection::reply(uint64_t serial, HttpResponse response) {
  if (!current(serial) || answer_given_) return;
  answer_given_ = true;
  write_whole(std::move(response));
}

void HttpServer::Connection::write_whole(HttpResponse response) {
  response.keep_alive(keep_alive());
  // A length already set is a HEAD answer's: its GET answer's, with no body.
  if (!response.has_content_length()) response.prepare_payload();
  response_ = std::make_shared<HttpResponse>(std::move(response));
  writing_ = true;
  stream_.expires_after(state_->limits.write_timeout);
  http::async_write(stream_, *response_, [self = shared_from_this()](beast::error_code ec, size_t) {
    self->on_answer_written(ec);
  });
}

void HttpServer::Connection::on_answer_written(beast::error_code ec) {
  writing_ = false;
  response_.reset();
  if (ec) {
    fail();
    return;
  }
  finish_exchange();
  if (!keep_alive()) {
    close_gracefully();
  } else if (watching_) {
    stream_.cancel();  // on_watch then reads the next request
  } else {
    read_request();
  }
}

void HttpServer::Connection::start_stream(uint64_t serial, http::status status,
                                          const http::fields& headers) {
  if (!current(serial) || answer_given_) return;
  answer_given_ = true;
  stream_head_.emplace(status, 11);
  for (const auto& field : headers) stream_head_->insert(field.name_string(), field.value());
  stream_head_->set(http::field::cache_control, "no-cache");
  stream_head_->keep_alive(keep_alive());
  stream_head_->chunked(true);
  head_serializer_.emplace(*stream_head_);
  writing_ = true;
  stream_.expires_after(state_->limits.write_timeout);
  http::async_write_header(stream_, *head_serializer_,
                           [self = shared_from_this()](beast::error_code e, size_t) {
                             self->writing_ = false;
                             if (e) {
                               self->fail();
                             } else {
                               self->flush_stream();
                             }
                           });
}

void HttpServer::Connection::stream_write(uint64_t serial, std::string data) {
  if (!current(serial) || !stream_head_ || stream_ended_ || data.empty()) return;
  pending_ += data;
  if (!writing_) flush_stream();
}

void HttpServer::Connection::end_stream(uint64_t serial) {
  if (!current(serial) || !stream_head_ || stream_ended_) return;
  stream_ended_ = true;
  if (!writing_) flush_stream();
}

void HttpServer::Connection::flush_stream() {
  if (broken_) return;
  if (!pending_.empty()) {
    inflight_ = chunk(pending_);
    pending_.clear();
  } else if (stream_ended_) {
    inflight_ = "0\r\n\r\n";
    stream_head_.reset();
    head_serializer_.reset();
  } else {
    return;
  }
  const bool last = !stream_head_;
  writing_ = true;
  stream_.expires_after(state_->limits.write_timeout);
  net::async_write(stream_, net::buffer(inflight_),
                   [self = shared_from_this(), last](beast::error_code ec, size_t) {
                     if (last) {
                       self->on_answer_written(ec);
                       return;
                     }
                     self->writing_ = false;
                     if (ec) {
                       self->fail();
                     } else {
                       self->flush_stream();
                     }
                   });
}

void HttpServer::Connection::finish_exchange() {
  if (!answering_) return;
  answering_ = false;
  --state_->active;
  exchange_.reset();
}

void HttpServer::Connection::fail() {
  auto exchange = exchange_.lock();
  close_now();
  if (exchange) exchange->mark_closed();
}

void HttpServer::Connection::close_now() {
  if (broken_) return;
  broken_ = true;
  beast::error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
  stream_.socket().close(ignored);
  stream_head_.reset();
  head_serializer_.reset();
  pending_.clear();
  auto exchange = exchange_.lock();
  finish_exchange();
  if (exchange) exchange->mark_closed();
}

void HttpServer::Connection::close_gracefully() {
  closing_ = true;
  beast::error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
  if (watching_) {
    stream_.cancel();  // on_watch then drains
  } else {
    drain();
  }
}

void HttpServer::Connection::drain() {
  if (broken_) return;
  buffer_.clear();
  stream_.expires_after(kLingerTime);
  stream_.async_read_some(buffer_.prepare(65536),
                          [self = shared_from_this()](beast::error_code ec, size_t) {
                            if (ec) {
                              self->close_now();
                            } else {
                              self->drain();
                            }
                          });
}

HttpServer::HttpServer(net::io_context& io, const std::string& host, uint16_t port,
                       HttpHandler& handler, HttpLimits limits)
    : state_(std::make_shared<State>(io, handler, limits)) {
  beast::error_code ec;
  const net::ip::address address = net::ip::make_address(host, ec);
  if (ec) {
    throw Error(ErrorKind::kUsage, "--host " + host +
                                       ": not an IP address; give one such as 127.0.0.1 "
                                       "(this machine only) or 0.0.0.0 (every interface)");
  }
  const tcp::endpoint endpoint(address, port);
  tcp::acceptor& a = state_->acceptor;
  if (!a.open(endpoint.protocol(), ec) &&
      !a.set_option(net::socket_base::reuse_address(true), ec) && !a.bind(endpoint, ec) &&
      !a.listen(net::socket_base::max_listen_connections, ec)) {
    return;
  }
  throw Error(ErrorKind::kUsage, "cannot listen on " + host + ":" + std::to_string(port) + " (" +
                                     ec.message() + "); pick another --port or --host");
}

HttpServer::~HttpServer() { close_all(); }

void HttpServer::start() {
  auto state = state_;
  struct Accept {
    std::shared_ptr<State> state;
    void operator()() const {
      auto s = state;
      s->acceptor.async_accept([s](beast::error_code ec, tcp::socket socket) {
        if (!s->acceptor.is_open()) return;
        if (ec) {
          // Out of descriptors, say: try again shortly rather than spin.
          s->retry.expires_after(std::chrono::milliseconds(100));
          s->retry.async_wait([s](beast::error_code e) {
            if (!e) Accept{s}();
          });
          return;
        }
        auto& list = s->connections;
        list.erase(std::remove_if(list.begin(), list.end(),
                                  [](const std::weak_ptr<Connection>& c) { return c.expired(); }),
                   list.end());
        auto connection = std::make_shared<Connection>(std::move(socket), s);
        list.push_back(connection);
        connection->start();
        Accept{s}();
      });
    }
  };
  Accept{state}();
}

uint16_t HttpServer::port() const {
  beast::error_code ec;
  return state_->acceptor.local_endpoint(ec).port();
}

void HttpServer::stop_accepting() {
  state_->draining = true;
  beast::error_code ignored;
  state_->acceptor.close(ignored);
  state_->retry.cancel();
  for (const auto& weak : state_->connections) {
    if (auto connection = weak.lock()) connection->close_when_idle();
  }
}

size_t HttpServer::active_exchanges() const { return state_->active; }

void HttpServer::close_all() {
  beast::error_code ignored;
  state_->acceptor.close(ignored);
  for (const auto& weak : state_->connections) {
    if (auto connection = weak.lock()) connection->close_now();
  }
}

}  // namespace duet::serve
