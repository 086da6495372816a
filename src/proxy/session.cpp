// ClientSession, client side: accepting, reading and parsing requests, timeouts, writing to the
// client, closing and lingering, and the access log. The exchange with a backend (picking,
// connecting, forwarding, the response) is in exchange.cpp.
//
// Flow: read -> RequestParser (head) -> pick a backend (bounded loads) -> connect or reuse ->
// forward the head (+ body, one buffer at a time) -> ResponseParser -> stream the response back
// -> finish: in-flight decrement, counters, access log -> next (pipelined) request or close.
#include "rondel/proxy/session.h"

#include <cstdio>
#include <cstring>

#include "rondel/http/writer.h"
#include "rondel/proxy/backend_conn.h"

namespace rondel::proxy {

namespace {

constexpr uint64_t kLingerMs = 2000;

http::Limits limits_of(const config::ListenerConfig* l) {
  http::Limits lim;
  if (l != nullptr) {
    lim.max_request_line = l->max_request_line;
    lim.max_header_bytes = l->max_header_bytes;
    lim.max_headers = l->max_headers;
    lim.max_body_bytes = l->max_body_bytes;
  }
  return lim;
}

http::Limits backend_limits() {
  http::Limits lim;
  lim.max_request_line = 8192;
  lim.max_header_bytes = 64 * 1024;
  lim.max_headers = 200;
  return lim;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Life cycle

ClientSession::~ClientSession() {
  if (xb_ != nullptr) worker_.give_exchange(xb_);
}

ExchangeBuffers::ExchangeBuffers(const http::Limits& lim)
    : limits(lim), req_parser(lim), resp_parser(backend_limits()) {}

bool ClientSession::take_exchange() noexcept {
  if (xb_ != nullptr) return true;
  xb_ = worker_.take_exchange(limits_of(listener_cfg_));
  if (xb_ == nullptr) return false;
  xb_->ex = Exchange{};
  if (tcp_.peer().family == 6) {
    xb_->client_ip_len =
        static_cast<uint8_t>(tcp_.peer().format(xb_->client_ip, sizeof xb_->client_ip));
  }
  xb_->to_backend.req.data = this;
  size_t words = snap_ ? snap_->max_scratch_words() : 0;
  if (xb_->tried.size() < words) xb_->tried.assign(words, 0);
  return true;
}

void ClientSession::give_exchange() noexcept {
  if (xb_ == nullptr || xb_->to_client.pending || xb_->to_backend.pending) return;
  worker_.give_exchange(xb_);
  xb_ = nullptr;
}

void ClientSession::accept(Worker& worker, uv_stream_t* server, const std::string& listener) {
  const auto& snap = worker.snapshot();
  ListenerRoute route = snap ? snap->route(listener) : ListenerRoute{};
  auto* s = new ClientSession(worker);
  s->snap_ = snap;
  s->listener_cfg_ = route.config;
  s->listener_pool_ = route.pool;
  worker.add_session(s);
  worker.stats().client_connections_open.fetch_add(1, std::memory_order_relaxed);
  worker.stats().client_connections_total.fetch_add(1, std::memory_order_relaxed);
  if (s->tcp_.accept(worker.loop(), server, s) != 0) {
    s->close_now();
    return;
  }
  if (route.config == nullptr || worker.draining()) {
    s->close_now();
    return;
  }
  // max_connections is per listener across every worker: one shared count per listener, kept
  // by the session until it closes (even if a reload removes the listener meanwhile).
  s->listener_state_ = route.state;
  if (s->listener_state_->open.fetch_add(1, std::memory_order_relaxed) >=
      route.config->max_connections) {
    worker.stats().rejected[static_cast<size_t>(Reject::kMaxConnections)].fetch_add(
        1, std::memory_order_relaxed);
    s->close_now();
    return;
  }
  s->set_client_reading(true);
  s->arm_client_timer();
}

void ClientSession::close_now() noexcept {
  if (closing()) return;
  if (in_exchange()) finish_exchange(Outcome::kClientAbort);
  if (closing()) return;
  worker_.stats().client_connections_open.fetch_sub(1, std::memory_order_relaxed);
  if (listener_state_) {
    listener_state_->open.fetch_sub(1, std::memory_order_relaxed);
    listener_state_.reset();
  }
  worker_.remove_session(this);
  reading_ = false;
  worker_.timeouts().clear(*this);
  tcp_.close();
}

void ClientSession::on_transport_closed() noexcept {
  if (buf_ != nullptr) {
    worker_.buffers().put(buf_);
    buf_ = nullptr;
  }
  // A write on a backend connection may still be pending (its cancellation callback runs when
  // that connection finishes closing): free the session only after it.
  if (xb_ != nullptr && xb_->to_backend.pending) {
    delete_when_written_ = true;
    return;
  }
  delete this;
}

void ClientSession::linger_close() noexcept {
  if (closing() || phase_ == Phase::kLinger) return;
  phase_ = Phase::kLinger;
  // Half-close, then read and discard until the client closes (or the linger time), so the
  // response is not destroyed by a reset caused by unread request bytes.
  if (tcp_.shutdown() != 0) {
    close_now();
    return;
  }
  rpos_ = rlen_ = 0;
  set_client_reading(true);
  set_timeout(kLingerMs);
}

void ClientSession::drain() noexcept {
  close_after_ = true;
  if (phase_ == Phase::kIdle && rpos_ == rlen_ && head_bytes_pending() == 0) {
    close_now();
  }
}

// ---------------------------------------------------------------------------------------------
// Client side

void ClientSession::set_client_reading(bool on, bool lazy) noexcept {
  if (closing()) return;
  want_read_ = on;
  if (on && !reading_) {
    if (tcp_.start_reading() == 0) reading_ = true;
  } else if (!on && reading_ && !lazy) {
    tcp_.stop_reading();
    reading_ = false;
  }
}

void ClientSession::arm_client_timer() noexcept {
  if (closing() || listener_cfg_ == nullptr) return;
  const auto& l = *listener_cfg_;
  uint64_t ms = 0;
  if (phase_ == Phase::kIdle) {
    bool head_started = rlen_ > rpos_ || head_bytes_pending() > 0;
    if (head_started) {
      if (head_timer_armed_) return;  // the header timeout runs from the head's first byte
      head_timer_armed_ = true;
      ms = l.header_timeout_ms;
    } else {
      ms = l.idle_timeout_ms;
    }
  } else if (phase_ == Phase::kExchange && !ex().req_done() && !xb_->to_backend.pending) {
    ms = l.body_timeout_ms;  // not while the backend is slow to take the body (backpressure)
  }
  set_timeout(ms);
}

void ClientSession::set_timeout(uint64_t ms) noexcept {
  // Without memory for a new lane the connection would have no timeout: close it instead.
  if (!worker_.timeouts().set(*this, ms)) close_now();
}

void ClientSession::on_transport_alloc(uv_buf_t* buf) noexcept {
  ClientSession* s = this;
  if (s->buf_ == nullptr) {
    s->buf_ = s->worker_.buffers().get();
    s->rpos_ = s->rlen_ = 0;
  }
  if (!s->want_read_) {
    // Lazily paused: append after what is held (parsed bytes may still be in a pending write).
    // A full buffer gives libuv no room: on_read then stops reading for real.
    *buf = uv_buf_init(s->buf_ + s->rlen_, static_cast<unsigned>(BufferPool::kSize - s->rlen_));
    return;
  }
  if (s->rpos_ == s->rlen_) {
    s->rpos_ = s->rlen_ = 0;
  } else if (s->rlen_ == BufferPool::kSize && s->rpos_ > 0 &&
             (s->xb_ == nullptr || !s->xb_->to_backend.pending)) {
    std::memmove(s->buf_, s->buf_ + s->rpos_, s->rlen_ - s->rpos_);
    s->rlen_ -= s->rpos_;
    s->rpos_ = 0;
  }
  *buf = uv_buf_init(s->buf_ + s->rlen_, static_cast<unsigned>(BufferPool::kSize - s->rlen_));
}

void ClientSession::on_transport_read(ssize_t nread) noexcept {
  ClientSession* s = this;
  if (nread == 0 || s->closing()) return;
  if (!s->want_read_) {
    // Bytes (a pipelined request) or EOF while an exchange runs: keep the bytes for later and
    // stop reading for real. libuv reports EOF or an error again once reading restarts.
    if (nread > 0) {
      s->rlen_ += static_cast<size_t>(nread);
      s->bytes_from_client_ += static_cast<uint64_t>(nread);
    }
    s->set_client_reading(false);
    return;
  }
  if (nread < 0) {
    s->client_eof();
    return;
  }
  if (s->phase_ == Phase::kLinger) {
    s->rpos_ = s->rlen_ = 0;
    return;
  }
  s->rlen_ += static_cast<size_t>(nread);
  s->bytes_from_client_ += static_cast<uint64_t>(nread);
  if (s->rlen_ == BufferPool::kSize) s->set_client_reading(false);
  if (s->phase_ == Phase::kIdle) s->arm_client_timer();
  else if (s->phase_ == Phase::kExchange && !s->ex().req_done()) s->arm_client_timer();
  s->pump_request();
}

void ClientSession::client_eof() noexcept {
  client_eof_ = true;
  set_client_reading(false);
  if (phase_ == Phase::kExchange && ex().req_done()) {
    // Half-closed after a complete request: finish the response, then close.
    close_after_ = true;
    return;
  }
  close_now();
}

void ClientSession::pump_request() noexcept {
  for (;;) {
    if (closing()) return;
    bool want_head = phase_ == Phase::kIdle;
    bool want_body = phase_ == Phase::kExchange && !ex().req_done() && ex().conn != nullptr;
    if (!want_head && !want_body) {
      set_client_reading(false);
      return;
    }
    if (want_head && rpos_ == rlen_ && xb_ == nullptr) {
      set_client_reading(true);  // idle, nothing to parse: stay without exchange buffers
      return;
    }
    if (!take_exchange()) {
      close_now();
      return;
    }
    if (xb_->to_backend.pending) {
      set_client_reading(false);
      return;
    }
    // Feed even when no byte is left: a message may end without one (a GET after its head).
    http::Step st = xb_->req_parser.feed(buf_ != nullptr ? buf_ + rpos_ : nullptr, rlen_ - rpos_);
    rpos_ += st.consumed;
    switch (st.event) {
      case http::Event::kNeedMore:
        // Everything received so far is consumed.
        if (want_body && !flush_to_backend()) return;
        rpos_ = rlen_ = 0;
        if (want_head && xb_->req_parser.head_bytes_pending() == 0) {
          // An idle keep-alive connection holds no read buffer and no exchange buffers.
          if (buf_ != nullptr) {
            worker_.buffers().put(buf_);
            buf_ = nullptr;
          }
          give_exchange();
        }
        set_client_reading(true);
        return;
      case http::Event::kHead:
        if (want_head) {
          on_request_head();
          return;
        }
        break;
      case http::Event::kBody:
        ex().body_pushed = true;
        if (!queue_body(xb_->to_backend,
                        xb_->req_parser.head().framing == http::Framing::kChunked, st.body,
                        &ClientSession::flush_to_backend)) {
          return;
        }
        break;
      case http::Event::kMessageEnd:
        if (xb_->req_parser.head().framing == http::Framing::kChunked) {
          xb_->to_backend.push(http::kLastChunk.data(), http::kLastChunk.size());
        }
        ex().request = RequestState::kDone;
        set_client_reading(false, /*lazy=*/true);
        worker_.timeouts().clear(*this);
        if (ex().conn != nullptr && !ex().resp_head_seen()) {
          ex().conn->arm_timer(ex().pool->config().response_header_timeout_ms);
        }
        if (!flush_to_backend()) return;
        if (ex().resp_complete() && !xb_->to_client.pending) response_done();
        return;
      case http::Event::kError:
        request_error(want_head);
        return;
    }
  }
}

void ClientSession::request_error(bool in_head) noexcept {
  const auto& err = xb_->req_parser.error();
  Reject r = Reject::kBadRequest;
  switch (err.status) {
    case 413: r = Reject::kBodyTooLarge; break;
    case 414: r = Reject::kUriTooLong; break;
    case 431: r = Reject::kHeaderTooLarge; break;
    case 501: r = Reject::kUpgrade; break;
    case 505: r = Reject::kVersion; break;
    default: break;
  }
  if (in_head) {
    reject(err.status, r, err.reason);
    return;
  }
  // The body broke its own framing: the backend got a partial request. Abort it.
  worker_.log().log_limited(Level::kWarn, worker_.now_ms(), "request_body_rejected", err.reason);
  fail_exchange(err.status, r, Outcome::kRejected);
}

void ClientSession::reject(uint16_t status, Reject reason, std::string_view why) noexcept {
  if (!take_exchange()) {
    close_now();
    return;
  }
  if (!head_known_) {
    // Refused before its head was whole: a request of its own, nothing of the previous one.
    ex() = Exchange{};
    ex().start_ns = uv_hrtime();
  }
  worker_.stats().rejected[static_cast<size_t>(reason)].fetch_add(1, std::memory_order_relaxed);
  if (worker_.log().enabled(Level::kWarn)) {
    std::string kv = "status=" + std::to_string(status) + " reason=" + std::string(why) +
                     " client=" + std::string(client_ip());
    worker_.log().log_limited(Level::kWarn, worker_.now_ms(), "request_rejected", kv);
  }
  ex().status = status;
  ex().response = ResponseState::kLocal;
  set_client_reading(false);
  std::string_view resp = http::canned_response(status);
  xb_->to_client.push(resp.data(), resp.size());
  close_after_ = true;
  close_after_flush_ = true;
  // A refused request gets its access-log line too. It reached no backend; before a complete
  // head there is no method or target to show. (The session object lives on until its handles'
  // close callbacks, so logging after a failed flush is safe.)
  bool head_known = head_known_;
  ex().backend = ex().owner = core::kNoBackend;
  bool flushed = flush_to_client();
  log_access(Outcome::kRejected, head_known);
  bytes_from_client_ = bytes_to_client_ = 0;
  if (flushed) linger_close();
}

bool ClientSession::flush_to_client() noexcept {
  if (xb_ == nullptr) return true;
  if (xb_->to_client.pending) return false;
  size_t bytes = xb_->to_client.bytes;
  int r = tcp_.write(xb_->to_client);
  if (r < 0) {
    xb_->to_client.clear();
    close_now();
    return false;
  }
  bytes_to_client_ += bytes;
  if (r > 0) {
    if (ex().conn != nullptr) ex().conn->pause_reading();
    return false;
  }
  return true;
}

void ClientSession::on_transport_written(int status) noexcept {
  ClientSession* s = this;
  s->xb_->to_client.pending = false;
  s->xb_->to_client.clear();
  if (s->closing()) return;
  if (status < 0) {
    s->close_now();
    return;
  }
  if (s->close_after_flush_) {
    s->linger_close();
    return;
  }
  if (!s->in_exchange()) return;
  if (s->ex().resp_complete()) {
    if (s->ex().conn != nullptr && s->ex().conn->available() > 0) {
      // Bytes after the response: this connection is not reusable.
      s->ex().backend_reusable = false;
    }
    s->response_done();
    return;
  }
  if (s->ex().conn != nullptr) {
    s->backend_progress();  // the response moves: the backend I/O timeout starts again
    s->pump_response();
  }
}

void ClientSession::on_timeout(net::Timeout* t) noexcept {
  auto* s = static_cast<ClientSession*>(t);
  if (s->closing()) return;
  switch (s->phase_) {
    case Phase::kLinger:
      s->close_now();
      return;
    case Phase::kIdle:
      if (s->rlen_ > s->rpos_ || s->head_bytes_pending() > 0) {
        s->reject(408, Reject::kClientTimeout, "header_timeout");
      } else {
        s->close_now();
      }
      return;
    case Phase::kExchange:
      if (!s->ex().req_done()) {
        s->worker_.log().log_limited(Level::kWarn, s->worker_.now_ms(), "client_body_timeout");
        s->fail_exchange(408, Reject::kClientTimeout, Outcome::kClientAbort);
      }
      return;
    case Phase::kConnecting:
      return;
  }
}

void ClientSession::log_access(Outcome outcome, bool head_known) noexcept {
  LogSink& sink = worker_.access_log();
  if (!sink.enabled() || xb_ == nullptr) return;
  AccessRecord r;
  if (head_known && xb_ != nullptr) {
    r.method = xb_->req_parser.head().method;
    r.target = xb_->req_parser.head().target;
  }
  r.client = client_ip();
  r.status = ex().status;
  r.bytes_in = bytes_from_client_;
  r.bytes_out = bytes_to_client_;
  if (ex().pool != nullptr) r.pool = ex().pool->name();
  else if (listener_pool_ != nullptr) r.pool = listener_pool_->name();  // refused before any exchange
  if (ex().backend != core::kNoBackend) r.backend = ex().pool->backend(ex().backend).id();
  if (ex().owner != core::kNoBackend && ex().keyed) r.owner = ex().pool->backend(ex().owner).id();
  r.hops = ex().hops;
  r.attempts = ex().attempts;
  r.duration_us = (uv_hrtime() - ex().start_ns) / 1000;
  static constexpr std::string_view kOutcome[] = {"ok", "client_abort", "backend_error",
                                                  "timeout", "rejected"};
  r.outcome = kOutcome[static_cast<int>(outcome)];
  r.worker = worker_.id();
  std::string& l = worker_.log_line();
  format_access(r, sink.format(), l);
  sink.write(l);
}

}  // namespace rondel::proxy