// ApiCall: resolve, connect (TCP or TLS transport), one request, the response through
// http::ResponseParser.
#include "api_client.h"

#include <netdb.h>

#include <cstring>

namespace rondel::server {

namespace {

// Reads run back to back on the loop thread and every byte is parsed at once, so one buffer per
// thread serves every call.
thread_local char t_read[16 * 1024];

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
  uv_timer_init(loop_, &timer_);
  timer_.data = this;
  resolve_.data = this;
}

ApiCall* ApiCall::start(uv_loop_t* loop, const config::ApiUrl& ep,
                        std::shared_ptr<const tls::ClientContext> tls, ApiRequest req,
                        ApiHandlers handlers) {
  auto* c = new ApiCall(loop, ep, std::move(req), std::move(handlers));
  c->begin(std::move(tls));
  return c;
}

ApiCall* get_small(uv_loop_t* loop, const config::Address& addr, std::string path,
                   uint64_t timeout_ms, size_t max_body,
                   std::function<void(std::string_view error, uint16_t status, std::string& body)>
                       done) {
  config::ApiUrl ep;
  ep.host = addr.host;
  ep.port = addr.port;
  ep.text = "http://" + addr.to_string();
  ApiRequest req;
  req.path = std::move(path);
  req.timeout_ms = timeout_ms;
  req.idle_ms = timeout_ms;
  struct Answer {
    std::string body;
    uint16_t status = 0;
    bool too_long = false;
  };
  auto answer = std::make_shared<Answer>();
  ApiHandlers h;
  h.on_head = [answer](uint16_t s) { answer->status = s; };
  h.on_data = [answer, max_body](std::string_view d) {
    if (answer->too_long || answer->body.size() + d.size() > max_body) {
      answer->too_long = true;
      answer->body.clear();
      return;
    }
    answer->body.append(d);
  };
  h.on_end = [answer, done = std::move(done)](std::string_view error) {
    if (error.empty() && answer->too_long) error = "too long";
    if (!error.empty()) answer->body.clear();
    done(error, answer->status, answer->body);
  };
  return ApiCall::start(loop, ep, nullptr, std::move(req), std::move(h));
}

void ApiCall::begin(std::shared_ptr<const tls::ClientContext> tls) noexcept {
  parser_.begin(req_.method == "HEAD");
  arm(req_.timeout_ms);
  if (ep_.tls) {
    if (!tls) return fail_soon("tls: no context");
    tls_ = std::make_unique<tls::TlsTransport>(std::move(tls), ep_.text, tcp_,
                                               static_cast<net::TransportEvents&>(*this));
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
    // Cancelled or timed out while resolving: the timer waits for this callback to close.
    c->close_handle(reinterpret_cast<uv_handle_t*>(&c->timer_));
  } else if (status != 0 || res == nullptr) {
    c->end(std::string("resolve ") + c->ep_.host + ": " + uv_strerror(status));
  } else {
    c->connect(res->ai_addr);
  }
  if (res != nullptr) uv_freeaddrinfo(res);
}

void ApiCall::connect(const sockaddr* sa) noexcept {
  connecting_ = true;
  int r = tls_ ? tls_->connect(loop_, sa, {}, ep_.host) : tcp_.connect(loop_, sa, this);
  if (r != 0) return fail_soon(std::string("connect: ") + uv_strerror(r));
}

void ApiCall::fail_soon(std::string error) noexcept {
  // From the timer: start() has returned, so the owner holds the pointer on_end clears.
  pending_error_ = std::move(error);
  uv_timer_start(&timer_, &on_timer, 0, 0);
}

void ApiCall::on_transport_connected(int status) noexcept {
  if (ended_) return;
  if (status == UV_EPROTO && tls_) {
    std::string why = "tls: " + std::string(tls::backend_handshake_name(tls_->handshake_result()));
    if (auto v = tls_->verify_error(); !v.empty()) why += " (" + std::string(v) + ")";
    return end(why);
  }
  if (status < 0) return end(std::string("connect: ") + uv_strerror(status));
  int r = transport().start_reading();
  if (r != 0) return end(std::string("read: ") + uv_strerror(r));
  send_request();
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
  head_ = std::move(head);
  out_.push(head_.data(), head_.size());
  const int r = transport().write(out_);
  if (r < 0) end(std::string("write: ") + uv_strerror(r));
}

void ApiCall::on_transport_written(int status) noexcept {
  out_.pending = false;
  out_.clear();
  if (status < 0 && !ended_) end(std::string("write: ") + uv_strerror(status));
}

void ApiCall::on_transport_alloc(uv_buf_t* buf) noexcept {
  *buf = uv_buf_init(t_read, sizeof t_read);
}

void ApiCall::on_transport_read(ssize_t n) noexcept {
  if (ended_ || n == 0) return;
  if (n < 0) return eof();  // the end of the stream, a reset or a TLS error
  if (req_.idle_ms > 0 && head_seen_) arm(req_.idle_ms);
  parse(t_read, static_cast<size_t>(n));
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
  close_handle(reinterpret_cast<uv_handle_t*>(&timer_));
  if (connecting_) {
    close_other();  // on_transport_closed follows
    transport().close();
  }
}

}  // namespace rondel::server
