// Connection: one accepted HTTP/1.1 client connection of kvsim, parsed with rondel's http module;
// one request at a time (the next is read once the answer has ended), answers whole or streamed
// as chunked server-sent events.
#pragma once

#include <uv.h>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "rondel/http/parser.h"

namespace kvsim {

class Connection;

struct HttpRequest {
  std::string method;
  std::string target;
  std::string body;
};

// What a Connection calls back. Both run on the loop's thread.
class RequestHandler {
 public:
  virtual ~RequestHandler() = default;
  // A whole request arrived on `c` (endpoint: the listener's number). The handler answers it
  // now or later through c's send/stream calls, which must end with send_whole or end_stream.
  virtual void on_request(Connection& c, HttpRequest request) noexcept = 0;
  // `c` is closing: the handler forgets it (no call on `c` after this returns).
  virtual void on_closed(Connection& c) noexcept = 0;
};

class Connection {
 public:
  // Accepts a pending connection on `server`. The Connection owns itself and is freed once its
  // handle is closed.
  static void accept(uv_stream_t* server, RequestHandler& handler, int endpoint,
                     uint64_t max_body) noexcept;

  int endpoint() const { return endpoint_; }
  // A whole answer; extra_headers are complete "Name: value\r\n" lines.
  void send_whole(int status, std::string_view content_type, std::string_view extra_headers,
                  std::string_view body) noexcept;
  // A 200 text/event-stream answer sent as chunks; then send_event, then end_stream.
  void start_stream(std::string_view extra_headers) noexcept;
  void send_event(std::string_view data) noexcept;
  void end_stream() noexcept;
  void close() noexcept;

  void* active = nullptr;  // the handler's request being answered, if any

 private:
  Connection(RequestHandler& handler, int endpoint, uint64_t max_body) noexcept;
  void process() noexcept;
  void finish_answer() noexcept;
  void write(std::string data) noexcept;
  void reject(const rondel::http::ParseError& e) noexcept;

  static void on_alloc(uv_handle_t* h, size_t, uv_buf_t* buf) noexcept;
  static void on_read(uv_stream_t* s, ssize_t n, const uv_buf_t* buf) noexcept;
  static void on_write(uv_write_t* req, int status) noexcept;
  static void on_close(uv_handle_t* h) noexcept;

  uv_tcp_t tcp_{};
  RequestHandler& handler_;
  int endpoint_;
  rondel::http::RequestParser parser_;
  std::string in_;
  HttpRequest request_;
  bool answering_ = false;  // a request was handed over and its answer has not ended
  bool keep_alive_ = true;
  bool close_after_writes_ = false;
  bool closing_ = false;
  uint32_t pending_writes_ = 0;
  std::array<char, 65536> read_buf_{};
};

}  // namespace kvsim
