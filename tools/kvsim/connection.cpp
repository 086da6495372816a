// Connection (see connection.h).
#include "connection.h"

#include <cstdio>

namespace kvsim {
namespace {

struct WriteRequest {
  uv_write_t req{};
  std::string data;
  Connection* conn = nullptr;
};

const char* reason_of(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 413: return "Content Too Large";
    case 503: return "Service Unavailable";
    default: return "Error";
  }
}

}  // namespace

Connection::Connection(RequestHandler& handler, int endpoint, uint64_t max_body) noexcept
    : handler_(handler),
      endpoint_(endpoint),
      parser_(rondel::http::Limits{8192, 65536, 100, max_body}) {}

void Connection::accept(uv_stream_t* server, RequestHandler& handler, int endpoint,
                        uint64_t max_body) noexcept {
  auto* c = new Connection(handler, endpoint, max_body);
  uv_tcp_init(server->loop, &c->tcp_);
  c->tcp_.data = c;
  if (uv_accept(server, reinterpret_cast<uv_stream_t*>(&c->tcp_)) != 0) {
    c->close();
    return;
  }
  uv_tcp_nodelay(&c->tcp_, 1);
  uv_read_start(reinterpret_cast<uv_stream_t*>(&c->tcp_), on_alloc, on_read);
}

void Connection::on_alloc(uv_handle_t* h, size_t, uv_buf_t* buf) noexcept {
  auto* c = static_cast<Connection*>(h->data);
  *buf = uv_buf_init(c->read_buf_.data(), c->read_buf_.size());
}

void Connection::on_read(uv_stream_t* s, ssize_t n, const uv_buf_t* buf) noexcept {
  auto* c = static_cast<Connection*>(s->data);
  if (n < 0) {
    c->close();
    return;
  }
  c->in_.append(buf->base, static_cast<size_t>(n));
  c->process();
}

void Connection::process() noexcept {
  using rondel::http::Event;
  size_t off = 0;
  while (!answering_ && !closing_) {
    auto step = parser_.feed(in_.data() + off, in_.size() - off);
    off += step.consumed;
    if (step.event == Event::kNeedMore) break;
    if (step.event == Event::kError) {
      reject(parser_.error());
      return;
    }
    if (step.event == Event::kHead) {
      const auto& head = parser_.head();
      request_.method = head.method;
      request_.target = head.target;
      request_.body.clear();
      keep_alive_ = head.keep_alive;
    } else if (step.event == Event::kBody) {
      request_.body.append(step.body);
    } else if (step.event == Event::kMessageEnd) {
      parser_.reset();
      answering_ = true;
      in_.erase(0, off);
      off = 0;
      handler_.on_request(*this, std::move(request_));
      request_ = HttpRequest{};
    }
  }
  if (off) in_.erase(0, off);
  uv_stream_t* s = reinterpret_cast<uv_stream_t*>(&tcp_);
  if (closing_) return;
  if (answering_) uv_read_stop(s);
  else uv_read_start(s, on_alloc, on_read);
}

void Connection::reject(const rondel::http::ParseError& e) noexcept {
  keep_alive_ = false;
  answering_ = true;
  std::string body = std::string(e.reason) + "\n";
  send_whole(e.status, "text/plain", "", body);
}

void Connection::write(std::string data) noexcept {
  if (closing_) return;
  auto* w = new WriteRequest;
  w->data = std::move(data);
  w->conn = this;
  uv_buf_t buf = uv_buf_init(w->data.data(), w->data.size());
  ++pending_writes_;
  if (uv_write(&w->req, reinterpret_cast<uv_stream_t*>(&tcp_), &buf, 1, on_write) != 0) {
    --pending_writes_;
    delete w;
    close();
  }
}

void Connection::on_write(uv_write_t* req, int status) noexcept {
  auto* w = reinterpret_cast<WriteRequest*>(req);
  Connection* c = w->conn;
  delete w;
  --c->pending_writes_;
  if (c->closing_) return;  // cancelled by close(): the close callback comes after this one
  if (status < 0 || (c->close_after_writes_ && c->pending_writes_ == 0)) c->close();
}

void Connection::send_whole(int status, std::string_view content_type,
                            std::string_view extra_headers, std::string_view body) noexcept {
  char head[256];
  int n = std::snprintf(head, sizeof head,
                        "HTTP/1.1 %d %s\r\nContent-Type: %.*s\r\nContent-Length: %zu\r\n%s", status,
                        reason_of(status), static_cast<int>(content_type.size()),
                        content_type.data(), body.size(), keep_alive_ ? "" : "Connection: close\r\n");
  std::string out(head, static_cast<size_t>(n));
  out += extra_headers;
  out += "\r\n";
  out += body;
  write(std::move(out));
  finish_answer();
}

void Connection::start_stream(std::string_view extra_headers) noexcept {
  std::string out = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                    "Transfer-Encoding: chunked\r\n";
  if (!keep_alive_) out += "Connection: close\r\n";
  out += extra_headers;
  out += "\r\n";
  write(std::move(out));
}

void Connection::send_event(std::string_view data) noexcept {
  char size[24];
  int n = std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  std::string out(size, static_cast<size_t>(n));
  out += data;
  out += "\r\n";
  write(std::move(out));
}

void Connection::end_stream() noexcept {
  write("0\r\n\r\n");
  finish_answer();
}

void Connection::finish_answer() noexcept {
  active = nullptr;
  answering_ = false;
  if (!keep_alive_) {
    close_after_writes_ = true;
    if (pending_writes_ == 0) close();
    return;
  }
  process();  // a pipelined request may already be here
}

void Connection::close() noexcept {
  if (closing_) return;
  closing_ = true;
  if (active) handler_.on_closed(*this);
  active = nullptr;
  uv_close(reinterpret_cast<uv_handle_t*>(&tcp_), on_close);
}

void Connection::on_close(uv_handle_t* h) noexcept { delete static_cast<Connection*>(h->data); }

}  // namespace kvsim
