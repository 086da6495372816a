// TcpTransport: libuv stream calls and callbacks, forwarded to the codec's TransportEvents, the
// PROXY protocol header stage, and the connect to a backend.
#include "rondel/net/tcp_transport.h"

#include <cstring>
#include <new>
#include <string>

namespace rondel::net {

int TcpTransport::accept(uv_loop_t* loop, uv_stream_t* server, TransportEvents* events) noexcept {
  events_ = events;
  uv_tcp_init(loop, &tcp_);
  tcp_.data = this;
  int rc = uv_accept(server, stream());
  if (rc != 0) return rc;
  uv_tcp_nodelay(&tcp_, 1);
  peer_.read(&tcp_);
  return 0;
}

// A connect in progress: its request, then the write of the first bytes (freed by their
// callbacks, which libuv runs with UV_ECANCELED when the handle closes first).
struct TcpTransport::Connecting {
  uv_connect_t req{};
  uv_write_t write{};
  TcpTransport* t = nullptr;
  std::string first;
};

int TcpTransport::connect(uv_loop_t* loop, const sockaddr* addr, TransportEvents* events,
                          std::string_view first_bytes) noexcept {
  events_ = events;
  uv_tcp_init(loop, &tcp_);
  tcp_.data = this;
  auto* c = new (std::nothrow) Connecting();
  if (c == nullptr) return UV_ENOMEM;
  c->t = this;
  c->req.data = c;
  if (!first_bytes.empty()) {
    try {
      c->first.assign(first_bytes);
    } catch (...) {
      delete c;
      return UV_ENOMEM;
    }
  }
  int rc = uv_tcp_connect(&c->req, &tcp_, addr, &on_connect);
  if (rc != 0) {
    delete c;
    return rc;
  }
  uv_tcp_nodelay(&tcp_, 1);
  return 0;
}

void TcpTransport::on_connect(uv_connect_t* req, int status) noexcept {
  auto* c = static_cast<Connecting*>(req->data);
  TcpTransport* t = c->t;
  if (t->closing_) {  // status is UV_ECANCELED after close()
    delete c;
    return;
  }
  if (status == 0 && !c->first.empty()) {
    // Later writes queue behind it: uv_try_write refuses while libuv holds a queued write. A
    // failure shows on the owner's own write or read, which follow on the same socket.
    uv_buf_t b = uv_buf_init(c->first.data(), static_cast<unsigned>(c->first.size()));
    int r = uv_try_write(t->stream(), &b, 1);
    const size_t done = r > 0 ? static_cast<size_t>(r) : 0;
    b.base += done;
    b.len -= static_cast<unsigned>(done);
    c->write.data = c;
    if (b.len == 0 || uv_write(&c->write, t->stream(), &b, 1, [](uv_write_t* w, int) noexcept {
          delete static_cast<Connecting*>(w->data);
        }) != 0) {
      delete c;
    }
  } else {
    delete c;
  }
  t->events_->on_transport_connected(status);
}

int TcpTransport::expect_proxy_header(const ProxyStageConfig& cfg) noexcept {
  sockaddr_storage ss{};
  int n = sizeof ss;
  bool trusted = false;
  if (uv_tcp_getpeername(&tcp_, reinterpret_cast<sockaddr*>(&ss), &n) == 0) {
    const uint8_t* bytes = nullptr;
    uint8_t family = 0;
    if (ss.ss_family == AF_INET) {
      bytes = reinterpret_cast<const uint8_t*>(&reinterpret_cast<sockaddr_in*>(&ss)->sin_addr);
      family = 4;
    } else if (ss.ss_family == AF_INET6) {
      bytes = reinterpret_cast<const uint8_t*>(&reinterpret_cast<sockaddr_in6*>(&ss)->sin6_addr);
      family = 6;
    }
    for (const core::Cidr& c : cfg.trusted) {
      if (bytes != nullptr && c.contains(family, bytes)) {
        trusted = true;
        break;
      }
    }
  }
  if (!trusted) {
    cfg.counters->rejects[static_cast<size_t>(ProxyReject::kUntrusted)].fetch_add(
        1, std::memory_order_relaxed);
    return UV_EACCES;
  }
  proxy_.reset(new (std::nothrow) ProxyStage{});
  if (proxy_ == nullptr) return UV_ENOMEM;
  proxy_->counters = cfg.counters;
  proxy_->deadline_ms = uv_now(tcp_.loop) + cfg.timeout_ms;
  return 0;
}

void TcpTransport::count_reject(ProxyReject r) noexcept {
  proxy_->counters->rejects[static_cast<size_t>(r)].fetch_add(1, std::memory_order_relaxed);
  proxy_.reset();
}

void TcpTransport::proxy_read(ssize_t nread, const uv_buf_t* buf) noexcept {
  if (nread < 0) {
    count_reject(ProxyReject::kEof);
    events_->on_transport_read(nread);
    return;
  }
  auto* data = reinterpret_cast<uint8_t*>(buf->base);
  const ProxyHeaderParser::Step st = proxy_->parser.feed(data, static_cast<size_t>(nread));
  switch (st.status) {
    case ProxyHeaderParser::Status::kNeedMore:
      return;  // the codec saw no byte: it lends the same buffer again; the parser keeps state
    case ProxyHeaderParser::Status::kInvalid:
      count_reject(proxy_->parser.error());
      events_->on_transport_read(UV_EPROTO);
      return;
    case ProxyHeaderParser::Status::kDone:
      break;
  }
  const ProxyHeader& h = proxy_->parser.header();
  if (h.carries_address()) {
    const bool v4 = h.family == ProxyFamily::kInet;
    peer_.assign(v4 ? AF_INET : AF_INET6, h.source.addr.data());
    carried_local_ = h.destination;
    carried_family_ = v4 ? 4 : 6;
  }
  proxy_->counters->headers[static_cast<size_t>(h.version)].fetch_add(
      1, std::memory_order_relaxed);
  proxy_.reset();
  const size_t rest = static_cast<size_t>(nread) - st.consumed;
  if (rest == 0) return;
  // The codec's contract: the bytes are at the start of the buffer it lent.
  std::memmove(buf->base, buf->base + st.consumed, rest);
  events_->on_transport_read(static_cast<ssize_t>(rest));
}

int TcpTransport::start_reading() noexcept {
  if (reading_ || closing_) return 0;
  int rc = uv_read_start(stream(), &on_alloc, &on_read);
  if (rc == 0) reading_ = true;
  return rc;
}

void TcpTransport::stop_reading() noexcept {
  if (!reading_) return;
  uv_read_stop(stream());
  reading_ = false;
}

int TcpTransport::write(OutQueue& q) noexcept {
  q.req.data = this;
  return q.flush(stream(), &on_written);
}

int TcpTransport::try_write(const char* p, size_t n) noexcept {
  if (closing_) return UV_ECANCELED;
  uv_buf_t buf = uv_buf_init(const_cast<char*>(p), static_cast<unsigned>(n));
  return uv_try_write(stream(), &buf, 1);
}

int TcpTransport::shutdown() noexcept {
  // The request is made here, not held by every connection (80 bytes of each idle one), and
  // freed by its callback, which libuv also runs (ECANCELED) when the handle closes first.
  auto* req = new (std::nothrow) uv_shutdown_t;
  if (req == nullptr) return UV_ENOMEM;
  int r = uv_shutdown(req, stream(), &on_shutdown);
  if (r != 0) delete req;
  return r;
}

void TcpTransport::close() noexcept {
  if (closing_) return;
  closing_ = true;
  reading_ = false;
  if (proxy_ != nullptr && uv_now(tcp_.loop) >= proxy_->deadline_ms) {
    count_reject(ProxyReject::kTimeout);
  }
  proxy_.reset();
  uv_close(reinterpret_cast<uv_handle_t*>(&tcp_), &on_closed);
}

bool TcpTransport::local_address(sockaddr_storage* out) const noexcept {
  if (carried_family_ == 4) {
    *out = sockaddr_storage{};
    auto* sin = reinterpret_cast<sockaddr_in*>(out);
    sin->sin_family = AF_INET;
    sin->sin_port = htons(carried_local_.port);
    std::memcpy(&sin->sin_addr, carried_local_.addr.data(), 4);
    return true;
  }
  if (carried_family_ == 6) {
    *out = sockaddr_storage{};
    auto* sin6 = reinterpret_cast<sockaddr_in6*>(out);
    sin6->sin6_family = AF_INET6;
    sin6->sin6_port = htons(carried_local_.port);
    std::memcpy(&sin6->sin6_addr, carried_local_.addr.data(), 16);
    return true;
  }
  int len = sizeof *out;
  return uv_tcp_getsockname(&tcp_, reinterpret_cast<sockaddr*>(out), &len) == 0;
}

int TcpTransport::splice_fd() const noexcept {
  uv_os_fd_t fd = -1;
  if (closing_ || uv_fileno(reinterpret_cast<const uv_handle_t*>(&tcp_), &fd) != 0) return -1;
  return fd;
}

void TcpTransport::on_alloc(uv_handle_t* h, size_t, uv_buf_t* buf) noexcept {
  static_cast<TcpTransport*>(h->data)->events_->on_transport_alloc(buf);
}

void TcpTransport::on_read(uv_stream_t* s, ssize_t nread, const uv_buf_t* buf) noexcept {
  auto* t = static_cast<TcpTransport*>(s->data);
  if (nread == 0 || t->closing_) return;
  if (t->proxy_ != nullptr) {
    t->proxy_read(nread, buf);
    return;
  }
  t->events_->on_transport_read(nread);
}

void TcpTransport::on_written(uv_write_t* req, int status) noexcept {
  static_cast<TcpTransport*>(req->data)->events_->on_transport_written(status);
}

void TcpTransport::on_shutdown(uv_shutdown_t* req, int) noexcept { delete req; }

void TcpTransport::on_closed(uv_handle_t* h) noexcept {
  static_cast<TcpTransport*>(h->data)->events_->on_transport_closed();
}

}  // namespace rondel::net
