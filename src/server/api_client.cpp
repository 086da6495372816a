// ApiCall: resolve, connect, TLS handshake, one request, the response through http::ResponseParser.
#include "api_client.h"

#include <netdb.h>

#include <cstring>

namespace rondel::server {

namespace {

// Reads run back to back on the loop thread and every byte is used at once (fed to the parser
// or to OpenSSL), so one buffer per thread serves every call.
thread_local char t_read[16 * 1024];
thread_local char t_plain[16 * 1024];

// One write in flight: the request's bytes (or TLS wire bytes) live with their request.
struct WriteReq {
  uv_write_t req{};
  std::string data;
};

http::Limits response_limits() {
  http::Limits l;
  l.max_header_bytes = 64 * 1024;
  l.max_headers = 200;
  return l;
}

}  // namespace

core::Result<std::shared_ptr<const tls::ClientContext>> api_tls_context(
    const std::string& source, const config::ApiUrl& ep, const std::string& ca) {
  if (!ep.tls) return std::shared_ptr<const tls::ClientContext>();
  config::BackendTlsConfig cfg;
  cfg.enabled = true;
  cfg.ca = ca;
  cfg.session_reuse = false;
  return tls::ClientContext::build(source, cfg);
}

ApiCall::ApiCall(uv_loop_t* loop, const config::ApiUrl& ep, ApiRequest req, ApiHandlers handlers)
    : loop_(loop), ep_(ep), req_(std::move(req)), handlers_(std::move(handlers)),
      parser_(response_limits()) {
  uv_tcp_init(loop_, &tcp_);
  uv_timer_init(loop_, &timer_);
  tcp_.data = this;
  timer_.data = this;
  resolve_.data = this;
  connect_req_.data = this;
}

ApiCall* ApiCall::start(uv_loop_t* loop, const config::ApiUrl& ep,
                        std::shared_ptr<const tls::ClientContext> tls, ApiRequest req,
                        ApiHandlers handlers) {
  auto* c = new ApiCall(loop, ep, std::move(req), std::move(handlers));
  c->begin(std::move(tls));
  return c;
}

void ApiCall::begin(std::shared_ptr<const tls::ClientContext> tls) noexcept {
  parser_.begin(req_.method == "HEAD");
  arm(req_.timeout_ms);
  if (ep_.tls) {
    server_name_ = ep_.host;
    tls_ = tls ? tls::ClientTls::start(std::move(tls), ep_.text, server_name_) : nullptr;
    if (!tls_) return fail_soon("tls: no context");
  }
  if (auto sa = net::to_sockaddr(ep_.host, ep_.port)) {
    return connect(reinterpret_cast<const sockaddr*>(&*sa));
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  const std::string port = std::to_string(ep_.port);
  int r = uv_getaddrinfo(loop_, &resolve_, &on_resolved, ep_.host.c_str(), port.c_str(), &hints);
  if (r != 0) return fail_soon(std::string("resolve: ") + uv_strerror(r));
  resolving_ = true;
}

void ApiCall::on_resolved(uv_getaddrinfo_t* req, int status, addrinfo* res) noexcept {
  auto* c = static_cast<ApiCall*>(req->data);
  c->resolving_ = false;
  if (c->ended_) {
    // Cancelled or timed out while resolving: the handles wait for this callback to close.
    c->close_handle(reinterpret_cast<uv_handle_t*>(&c->tcp_));
    c->close_handle(reinterpret_cast<uv_handle_t*>(&c->timer_));
  } else if (status != 0 || res == nullptr) {
    c->end(std::string("resolve ") + c->ep_.host + ": " + uv_strerror(status));
  } else {
    c->connect(res->ai_addr);
  }
  if (res != nullptr) uv_freeaddrinfo(res);
}

void ApiCall::connect(const sockaddr* sa) noexcept {
  int r = uv_tcp_connect(&connect_req_, &tcp_, sa, &on_connect);
  if (r != 0) return fail_soon(std::string("connect: ") + uv_strerror(r));
}

void ApiCall::fail_soon(std::string error) noexcept {
  // From the timer: start() has returned, so the owner holds the pointer on_end clears.
  pending_error_ = std::move(error);
  uv_timer_start(&timer_, &on_timer, 0, 0);
}

void ApiCall::on_connect(uv_connect_t* req, int status) noexcept {
  auto* c = static_cast<ApiCall*>(req->data);
  if (c->ended_) return;
  if (status < 0) return c->end(std::string("connect: ") + uv_strerror(status));
  c->connected();
}

void ApiCall::connected() noexcept {
  uv_tcp_nodelay(&tcp_, 1);
  int r = uv_read_start(reinterpret_cast<uv_stream_t*>(&tcp_), &on_alloc, &on_read);
  if (r != 0) return end(std::string("read: ") + uv_strerror(r));
  if (!tls_) return send_request();
  handshaking_ = true;
  read_tls(nullptr, 0);  // the ClientHello
}

void ApiCall::send_request() noexcept {
  std::string head = req_.method + " " + ep_.base_path + req_.path + " HTTP/1.1\r\nHost: ";
  head += ep_.host.find(':') != std::string::npos ? "[" + ep_.host + "]" : ep_.host;
  if ((ep_.tls && ep_.port != 443) || (!ep_.tls && ep_.port != 80)) {
    head += ":" + std::to_string(ep_.port);
  }
  head += "\r\nUser-Agent: rondel\r\nAccept: application/json\r\nConnection: close\r\n";
  for (const auto& [name, value] : req_.headers) head += name + ": " + value + "\r\n";
  if (!req_.body.empty() || req_.method == "POST" || req_.method == "PUT") {
    head += "Content-Type: application/json\r\nContent-Length: " +
            std::to_string(req_.body.size()) + "\r\n";
  }
  head += "\r\n";
  head += req_.body;
  if (!tls_) {
    send(std::move(head));
    return;
  }
  if (!tls_->write(head.data(), head.size())) return end("tls: write failed");
  flush_tls();
}

bool ApiCall::send(std::string bytes) noexcept {
  auto* w = new WriteReq();
  w->data = std::move(bytes);
  w->req.data = this;
  uv_buf_t b = uv_buf_init(w->data.data(), static_cast<unsigned>(w->data.size()));
  int r = uv_write(&w->req, reinterpret_cast<uv_stream_t*>(&tcp_), &b, 1,
                   [](uv_write_t* req, int status) noexcept {
                     auto* wr = reinterpret_cast<WriteReq*>(req);
                     auto* c = static_cast<ApiCall*>(req->data);
                     delete wr;
                     if (status < 0 && !c->ended_) {
                       c->end(std::string("write: ") + uv_strerror(status));
                     }
                   });
  if (r != 0) {
    delete w;
    end(std::string("write: ") + uv_strerror(r));
    return false;
  }
  return true;
}

bool ApiCall::flush_tls() noexcept {
  std::string& wire = tls_->wire();
  if (wire.empty()) return true;
  std::string out;
  out.swap(wire);
  return send(std::move(out));
}

void ApiCall::on_alloc(uv_handle_t*, size_t, uv_buf_t* buf) noexcept {
  *buf = uv_buf_init(t_read, sizeof t_read);
}

void ApiCall::on_read(uv_stream_t* s, ssize_t n, const uv_buf_t* buf) noexcept {
  auto* c = static_cast<ApiCall*>(s->data);
  if (c->ended_ || n == 0) return;
  if (n < 0) {
    if (c->tls_ && !c->handshaking_) c->read_tls(nullptr, 0);  // plaintext still buffered
    if (!c->ended_) c->eof();
    return;
  }
  if (c->req_.idle_ms > 0 && c->head_seen_) c->arm(c->req_.idle_ms);
  c->read(buf->base, static_cast<size_t>(n));
}

void ApiCall::read(const char* p, size_t n) noexcept {
  if (tls_) return read_tls(p, n);
  parse(p, n);
}

void ApiCall::read_tls(const char* p, size_t n) noexcept {
  if (n > 0) tls_->feed(p, n);
  if (handshaking_) {
    const tls::ClientTls::Step step = tls_->handshake();
    if (!flush_tls()) return;
    if (step == tls::ClientTls::Step::kMore) return;
    handshaking_ = false;
    if (step == tls::ClientTls::Step::kFailed) {
      std::string why = "tls: " + std::string(tls::backend_handshake_name(tls_->result()));
      if (auto v = tls_->verify_error(); !v.empty()) why += " (" + std::string(v) + ")";
      return end(why);
    }
    send_request();
  }
  while (!ended_) {
    const ssize_t got = tls_->read(t_plain, sizeof t_plain);
    if (!flush_tls()) return;
    if (got <= 0) {
      if (got < 0) eof();
      return;
    }
    parse(t_plain, static_cast<size_t>(got));
  }
}

void ApiCall::parse(const char* p, size_t n) noexcept {
  size_t off = 0;
  while (!ended_) {
    const http::Step step = parser_.feed(p + off, n - off);
    off += step.consumed;
    switch (step.event) {
      case http::Event::kNeedMore:
        return;
      case http::Event::kHead: {
        const uint16_t status = parser_.head().status;
        if (status < 200) {  // 100 Continue and friends: the final response follows
          break;
        }
        head_seen_ = true;
        if (req_.idle_ms > 0) arm(req_.idle_ms);
        else uv_timer_stop(&timer_);
        if (handlers_.on_head) handlers_.on_head(status);
        break;
      }
      case http::Event::kBody:
        if (handlers_.on_data) handlers_.on_data(step.body);
        break;
      case http::Event::kMessageEnd:
        if (!head_seen_) {
          parser_.begin(req_.method == "HEAD");
          break;
        }
        return end("");
      case http::Event::kError:
        return end("bad response: " + std::string(parser_.error().reason));
    }
  }
}

void ApiCall::eof() noexcept {
  const http::Step step = parser_.finish();
  if (step.event == http::Event::kMessageEnd && head_seen_) return end("");
  end("closed");
}

void ApiCall::arm(uint64_t ms) noexcept {
  uv_timer_start(&timer_, &on_timer, ms > 0 ? ms : 1, 0);
}

void ApiCall::on_timer(uv_timer_t* t) noexcept {
  auto* c = static_cast<ApiCall*>(t->data);
  if (c->ended_) return;
  if (!c->pending_error_.empty()) return c->end(c->pending_error_);
  c->end(c->head_seen_ ? "idle timeout" : "timeout");
}

void ApiCall::end(std::string_view error) noexcept {
  if (ended_) return;
  ended_ = true;
  ApiHandlers h = std::move(handlers_);
  handlers_ = {};
  if (h.on_end) h.on_end(error);
  cancel();
}

void ApiCall::cancel() noexcept {
  ended_ = true;
  handlers_ = {};
  if (closing()) return;
  uv_timer_stop(&timer_);
  if (resolving_) {
    uv_cancel(reinterpret_cast<uv_req_t*>(&resolve_));
    return;  // on_resolved closes the handles
  }
  close_handle(reinterpret_cast<uv_handle_t*>(&tcp_));
  close_handle(reinterpret_cast<uv_handle_t*>(&timer_));
}

}  // namespace rondel::server
