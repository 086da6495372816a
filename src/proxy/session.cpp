// ClientSession: the request/response state machine of one client connection.
//
// Flow: read -> RequestParser (head) -> pick a backend (bounded loads) -> connect or reuse ->
// forward the head (+ body, one buffer at a time) -> ResponseParser -> stream the response back
// -> finish: in-flight decrement, counters, access log -> next (pipelined) request or close.
#include "rondel/proxy/session.h"

#include <cstring>

#include "rondel/core/bitset.h"
#include "rondel/core/hash.h"
#include "rondel/http/writer.h"
#include "rondel/proxy/backend_conn.h"
#include "rondel/proxy/hash_key.h"

namespace rondel::proxy {

namespace {

constexpr uint64_t kLingerMs = 2000;
constexpr std::string_view k100Continue = "HTTP/1.1 100 Continue\r\n\r\n";

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
// OutQueue

void OutQueue::push(const char* p, size_t len) noexcept {
  if (len == 0) return;
  bufs[n++] = uv_buf_init(const_cast<char*>(p), static_cast<unsigned>(len));
  bytes += len;
}

void OutQueue::push_chunk_header(uint64_t len) noexcept {
  char* h = chunk_heads[heads++];
  push(h, http::chunk_header(len, h));
}

int OutQueue::flush(uv_stream_t* s, uv_write_cb cb) noexcept {
  if (n == 0) return 0;
  int r = uv_try_write(s, bufs, static_cast<unsigned>(n));
  if (r < 0 && r != UV_EAGAIN) return r;
  size_t written = r > 0 ? static_cast<size_t>(r) : 0;
  if (written == bytes) {
    clear();
    return 0;
  }
  int i = 0;
  while (written >= bufs[i].len) {
    written -= bufs[i].len;
    ++i;
  }
  bufs[i].base += written;
  bufs[i].len -= written;
  int rc = uv_write(&req, s, bufs + i, static_cast<unsigned>(n - i), cb);
  if (rc != 0) return rc;
  pending = true;
  return 1;
}

// ---------------------------------------------------------------------------------------------
// Life cycle

ClientSession::ClientSession(Worker& worker, std::string listener, const http::Limits& limits)
    : worker_(worker),
      listener_(std::move(listener)),
      req_parser_(limits),
      resp_parser_(backend_limits()) {}

ClientSession::~ClientSession() = default;

void ClientSession::accept(Worker& worker, uv_stream_t* server, const std::string& listener) {
  const auto& snap = worker.snapshot();
  ListenerRoute route = snap ? snap->route(listener) : ListenerRoute{};
  auto* s = new ClientSession(worker, listener, limits_of(route.config));
  s->snap_ = snap;
  s->route_ = route;
  uv_tcp_init(worker.loop(), &s->tcp_);
  uv_timer_init(worker.loop(), &s->timer_);
  s->tcp_.data = s;
  s->timer_.data = s;
  s->to_client_.req.data = s;
  s->to_backend_.req.data = s;
  s->shutdown_req_.data = s;
  worker.add_session(s);
  worker.stats().client_connections_open.fetch_add(1, std::memory_order_relaxed);
  worker.stats().client_connections_total.fetch_add(1, std::memory_order_relaxed);
  if (uv_accept(server, reinterpret_cast<uv_stream_t*>(&s->tcp_)) != 0) {
    s->close_now();
    return;
  }
  if (route.config == nullptr || worker.draining()) {
    s->close_now();
    return;
  }
  if (worker.sessions() > route.config->max_connections) {
    worker.stats().rejected[static_cast<size_t>(Reject::kMaxConnections)].fetch_add(
        1, std::memory_order_relaxed);
    s->close_now();
    return;
  }
  uv_tcp_nodelay(&s->tcp_, 1);
  s->client_ip_len_ = net::peer_ip(&s->tcp_, s->client_ip_, sizeof s->client_ip_);
  s->tried_.assign(snap->max_scratch_words(), 0);
  s->set_client_reading(true);
  s->arm_client_timer();
}

void ClientSession::close_now() noexcept {
  if (closing()) return;
  if (in_exchange()) finish_exchange(Outcome::kClientAbort);
  if (closing()) return;
  worker_.stats().client_connections_open.fetch_sub(1, std::memory_order_relaxed);
  worker_.remove_session(this);
  reading_ = false;
  close_handle(reinterpret_cast<uv_handle_t*>(&tcp_));
  close_handle(reinterpret_cast<uv_handle_t*>(&timer_));
}

void ClientSession::on_all_closed() noexcept {
  if (buf_ != nullptr) {
    worker_.buffers().put(buf_);
    buf_ = nullptr;
  }
  // A write on a backend connection may still be pending (its cancellation callback runs when
  // that connection finishes closing): free the session only after it.
  if (to_backend_.pending) {
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
  if (uv_shutdown(&shutdown_req_, reinterpret_cast<uv_stream_t*>(&tcp_), &on_shutdown) != 0) {
    close_now();
    return;
  }
  rpos_ = rlen_ = 0;
  set_client_reading(true);
  uv_timer_start(&timer_, &on_timer, kLingerMs, 0);
}

void ClientSession::on_shutdown(uv_shutdown_t*, int) noexcept {}

void ClientSession::drain() noexcept {
  close_after_ = true;
  if (phase_ == Phase::kIdle && rpos_ == rlen_ && req_parser_.head_bytes_pending() == 0) {
    close_now();
  }
}

// ---------------------------------------------------------------------------------------------
// Client side

void ClientSession::set_client_reading(bool on) noexcept {
  if (closing()) return;
  auto* s = reinterpret_cast<uv_stream_t*>(&tcp_);
  if (on && !reading_) {
    if (uv_read_start(s, &on_alloc, &on_read) == 0) reading_ = true;
  } else if (!on && reading_) {
    uv_read_stop(s);
    reading_ = false;
  }
}

void ClientSession::arm_client_timer() noexcept {
  if (closing() || route_.config == nullptr) return;
  const auto& l = *route_.config;
  uint64_t ms = 0;
  if (phase_ == Phase::kIdle) {
    bool head_started = rlen_ > rpos_ || req_parser_.head_bytes_pending() > 0;
    if (head_started) {
      if (head_timer_armed_) return;  // the header timeout runs from the head's first byte
      head_timer_armed_ = true;
      ms = l.header_timeout_ms;
    } else {
      ms = l.idle_timeout_ms;
    }
  } else if (phase_ == Phase::kExchange && !req_done_) {
    ms = l.body_timeout_ms;
  }
  if (ms == 0) {
    uv_timer_stop(&timer_);
  } else {
    uv_timer_start(&timer_, &on_timer, ms, 0);
  }
}

void ClientSession::on_alloc(uv_handle_t* h, size_t, uv_buf_t* buf) noexcept {
  auto* s = static_cast<ClientSession*>(h->data);
  if (s->buf_ == nullptr) {
    s->buf_ = s->worker_.buffers().get();
    s->rpos_ = s->rlen_ = 0;
  }
  if (s->rpos_ == s->rlen_) {
    s->rpos_ = s->rlen_ = 0;
  } else if (s->rlen_ == BufferPool::kSize && s->rpos_ > 0 && !s->to_backend_.pending) {
    std::memmove(s->buf_, s->buf_ + s->rpos_, s->rlen_ - s->rpos_);
    s->rlen_ -= s->rpos_;
    s->rpos_ = 0;
  }
  *buf = uv_buf_init(s->buf_ + s->rlen_, static_cast<unsigned>(BufferPool::kSize - s->rlen_));
}

void ClientSession::on_read(uv_stream_t* st, ssize_t nread, const uv_buf_t*) noexcept {
  auto* s = static_cast<ClientSession*>(st->data);
  if (nread == 0 || s->closing()) return;
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
  else if (s->phase_ == Phase::kExchange && !s->req_done_) s->arm_client_timer();
  s->pump_request();
}

void ClientSession::client_eof() noexcept {
  client_eof_ = true;
  set_client_reading(false);
  if (phase_ == Phase::kExchange && req_done_) {
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
    bool want_body = phase_ == Phase::kExchange && !req_done_ && conn_ != nullptr;
    if (!want_head && !want_body) {
      set_client_reading(false);
      return;
    }
    if (to_backend_.pending) {
      set_client_reading(false);
      return;
    }
    // Feed even when no byte is left: a message may end without one (a GET after its head).
    http::Step st = req_parser_.feed(buf_ != nullptr ? buf_ + rpos_ : nullptr, rlen_ - rpos_);
    rpos_ += st.consumed;
    switch (st.event) {
      case http::Event::kNeedMore:
        // Everything received so far is consumed.
        if (want_body && !flush_to_backend()) return;
        rpos_ = rlen_ = 0;
        if (want_head && req_parser_.head_bytes_pending() == 0 && buf_ != nullptr) {
          worker_.buffers().put(buf_);  // an idle keep-alive connection holds no buffer
          buf_ = nullptr;
        }
        set_client_reading(true);
        return;
      case http::Event::kHead:
        if (want_head) {
          on_request_head();
          return;
        }
        break;
      case http::Event::kBody: {
        const auto& head = req_parser_.head();
        if (head.framing == http::Framing::kChunked) {
          if (!to_backend_.room(3) && !flush_to_backend()) return;
          to_backend_.push_chunk_header(st.body.size());
          to_backend_.push(st.body.data(), st.body.size());
          to_backend_.push(http::kChunkTrailer.data(), http::kChunkTrailer.size());
        } else {
          if (!to_backend_.room(1) && !flush_to_backend()) return;
          to_backend_.push(st.body.data(), st.body.size());
        }
        if (!to_backend_.room(3) && !flush_to_backend()) return;
        break;
      }
      case http::Event::kMessageEnd:
        if (req_parser_.head().framing == http::Framing::kChunked) {
          to_backend_.push(http::kLastChunk.data(), http::kLastChunk.size());
        }
        req_done_ = true;
        set_client_reading(false);
        uv_timer_stop(&timer_);
        if (conn_ != nullptr && !resp_head_seen_) {
          conn_->arm_timer(pool_->config().response_header_timeout_ms);
        }
        if (!flush_to_backend()) return;
        if (resp_complete_ && !to_client_.pending) response_done();
        return;
      case http::Event::kError: {
        const auto& err = req_parser_.error();
        Reject r = Reject::kBadRequest;
        switch (err.status) {
          case 413: r = Reject::kBodyTooLarge; break;
          case 414: r = Reject::kUriTooLong; break;
          case 431: r = Reject::kHeaderTooLarge; break;
          case 501: r = Reject::kUpgrade; break;
          case 505: r = Reject::kVersion; break;
          default: break;
        }
        if (want_head) {
          reject(err.status, r, err.reason);
        } else {
          // The body broke its own framing: the backend got a partial request. Abort it.
          worker_.log().log_limited(Level::kWarn, worker_.now_ms(), "request_body_rejected",
                                    err.reason);
          fail_exchange(err.status, r, Outcome::kRejected);
        }
        return;
      }
    }
  }
}

void ClientSession::reject(uint16_t status, Reject reason, std::string_view why) noexcept {
  worker_.stats().rejected[static_cast<size_t>(reason)].fetch_add(1, std::memory_order_relaxed);
  if (worker_.log().enabled(Level::kWarn)) {
    std::string kv = "status=" + std::to_string(status) + " reason=" + std::string(why) +
                     " client=" + std::string(client_ip_, client_ip_len_);
    worker_.log().log_limited(Level::kWarn, worker_.now_ms(), "request_rejected", kv);
  }
  status_ = status;
  set_client_reading(false);
  std::string_view resp = http::canned_response(status);
  to_client_.push(resp.data(), resp.size());
  close_after_ = true;
  close_after_flush_ = true;
  // A refused request gets its access-log line too. It reached no backend; before a complete
  // head there is no method or target to show. (The session object lives on until its handles'
  // close callbacks, so logging after a failed flush is safe.)
  bool head_known = head_known_;
  backend_ = owner_ = core::kNoBackend;
  if (!head_known) {
    start_ns_ = uv_hrtime();
    hops_ = 0;
    attempts_ = 0;
  }
  bool flushed = flush_to_client();
  log_access(Outcome::kRejected, head_known);
  bytes_from_client_ = bytes_to_client_ = 0;
  if (flushed) linger_close();
}

bool ClientSession::flush_to_client() noexcept {
  if (to_client_.pending) return false;
  size_t bytes = to_client_.bytes;
  int r = to_client_.flush(reinterpret_cast<uv_stream_t*>(&tcp_), &on_client_written);
  if (r < 0) {
    to_client_.clear();
    close_now();
    return false;
  }
  bytes_to_client_ += bytes;
  if (r > 0) {
    if (conn_ != nullptr) conn_->pause_reading();
    return false;
  }
  return true;
}

bool ClientSession::flush_to_backend() noexcept {
  if (to_backend_.pending) return false;
  if (to_backend_.n == 0) return true;
  req_bytes_sent_ = true;
  BackendState& st = pool_->backend(backend_);
  st.counters.bytes_out.fetch_add(to_backend_.bytes, std::memory_order_relaxed);
  int r = to_backend_.flush(conn_->stream(), &on_backend_written);
  if (r < 0) {
    to_backend_.clear();
    attempt_failed(false, Reject::kBackendError, 502);
    return false;
  }
  if (r > 0) {
    set_client_reading(false);
    return false;
  }
  return true;
}

void ClientSession::on_client_written(uv_write_t* req, int status) noexcept {
  auto* s = static_cast<ClientSession*>(req->data);
  s->to_client_.pending = false;
  s->to_client_.clear();
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
  if (s->resp_complete_) {
    if (s->conn_ != nullptr && s->conn_->available() > 0) {
      // Bytes after the response: this connection is not reusable.
      s->backend_reusable_ = false;
    }
    s->response_done();
    return;
  }
  if (s->conn_ != nullptr) s->pump_response();
}

void ClientSession::on_backend_written(uv_write_t* req, int status) noexcept {
  auto* s = static_cast<ClientSession*>(req->data);
  s->to_backend_.pending = false;
  s->to_backend_.clear();
  if (s->delete_when_written_) {
    delete s;
    return;
  }
  if (s->closing()) return;
  if (s->retry_after_write_) {
    s->retry_after_write_ = false;
    s->start_attempt();
    return;
  }
  if (status < 0) {
    if (s->conn_ != nullptr && s->in_exchange()) s->attempt_failed(false, Reject::kBackendError, 502);
    return;
  }
  if (!s->in_exchange()) return;
  if (s->conn_ != nullptr && !s->resp_head_seen_) {
    s->conn_->arm_timer(s->req_done_ ? s->pool_->config().response_header_timeout_ms
                                     : s->pool_->config().backend_io_timeout_ms);
  }
  if (s->req_done_) {
    if (s->resp_complete_ && !s->to_client_.pending) s->response_done();
    return;
  }
  s->arm_client_timer();
  s->pump_request();
}

void ClientSession::on_timer(uv_timer_t* t) noexcept {
  auto* s = static_cast<ClientSession*>(t->data);
  if (s->closing()) return;
  switch (s->phase_) {
    case Phase::kLinger:
      s->close_now();
      return;
    case Phase::kIdle:
      if (s->rlen_ > s->rpos_ || s->req_parser_.head_bytes_pending() > 0) {
        s->reject(408, Reject::kClientTimeout, "header_timeout");
      } else {
        s->close_now();
      }
      return;
    case Phase::kExchange:
      if (!s->req_done_) {
        s->worker_.log().log_limited(Level::kWarn, s->worker_.now_ms(), "client_body_timeout");
        s->fail_exchange(408, Reject::kClientTimeout, Outcome::kClientAbort);
      }
      return;
    case Phase::kConnecting:
      return;
  }
}

// ---------------------------------------------------------------------------------------------
// Exchange

void ClientSession::on_request_head() noexcept {
  const auto& head = req_parser_.head();
  if (worker_.snapshot() != snap_) {
    // Between requests: move to the newest configuration.
    snap_ = worker_.snapshot();
    route_ = snap_->route(listener_);
    if (tried_.size() < snap_->max_scratch_words()) tried_.assign(snap_->max_scratch_words(), 0);
  }
  set_client_reading(false);
  uv_timer_stop(&timer_);
  head_timer_armed_ = false;
  head_known_ = true;
  start_ns_ = uv_hrtime();
  status_ = 0;
  hops_ = 0;
  attempts_ = 0;
  req_done_ = req_bytes_sent_ = resp_started_ = resp_head_seen_ = resp_complete_ = false;
  sent_continue_ = in_interim_ = false;
  backend_reusable_ = true;
  backend_ = owner_ = core::kNoBackend;
  worker_.stats().requests.fetch_add(1, std::memory_order_relaxed);
  if (route_.config == nullptr || route_.pool == nullptr) {
    reject(503, Reject::kNoBackend, "listener_removed");
    return;
  }
  pool_ = route_.pool;
  pool_->state().requests.fetch_add(1, std::memory_order_relaxed);
  std::fill(tried_.begin(), tried_.end(), 0);

  std::string_view key;
  const auto& pc = pool_->config();
  keyed_ = extract_key(pc.hash_key, head, std::string_view(client_ip_, client_ip_len_), key);
  key_ = keyed_ ? key : std::string_view{};
  if (keyed_) {
    hash_ = core::hash64(key);
  } else {
    switch (pc.missing_key) {
      case config::MissingKeyPolicy::kHashUri:
        hash_ = core::hash64(head.target);
        key_ = head.target;
        keyed_ = true;
        break;
      case config::MissingKeyPolicy::kRandom:
        hash_ = core::mix64(uv_hrtime(), reinterpret_cast<uintptr_t>(this));
        keyed_ = true;
        break;
      case config::MissingKeyPolicy::kReject:
        reject(400, Reject::kBadRequest, "missing_hash_key");
        return;
      case config::MissingKeyPolicy::kLeastInFlight:
        break;
    }
  }
  phase_ = Phase::kConnecting;
  start_attempt();
}

void ClientSession::start_attempt() noexcept {
  ++attempts_;
  phase_ = Phase::kConnecting;
  std::span<uint64_t> tried(tried_.data(), pool_->excluded_words());
  for (;;) {
    core::BackendIndex b = core::kNoBackend;
    if (keyed_) {
      core::PickResult r = pool_->pick(hash_, tried, worker_.scratch(pool_->scratch_words()));
      b = r.backend;
      if (owner_ == core::kNoBackend) owner_ = r.owner;
      // This walk passes over the backends already tried (excluded) as well as full ones, so it
      // counts every hop of the earlier attempts again: assign, do not accumulate.
      hops_ = static_cast<uint16_t>(r.skipped_full + r.skipped_excluded);
      if (r.all_full) pool_->state().all_full.fetch_add(1, std::memory_order_relaxed);
    } else {
      b = pool_->least_loaded(tried);
      if (owner_ == core::kNoBackend) owner_ = b;
      hops_ = static_cast<uint16_t>(attempts_ - 1);  // one backend passed over per retry
    }
    if (b == core::kNoBackend) {
      pool_->state().no_backend.fetch_add(1, std::memory_order_relaxed);
      fail_exchange(503, Reject::kNoBackend, Outcome::kRejected);
      return;
    }
    BackendState& st = pool_->backend(b);
    uint32_t max_conns = pool_->config().max_connections_per_backend;
    if (max_conns != 0 && st.idle_count() == 0 && st.open_connections >= max_conns) {
      // At its connection limit: treat like a full backend and walk on.
      core::bit_set(tried, b);
      continue;
    }
    backend_ = b;
    st.in_flight.fetch_add(1, std::memory_order_relaxed);
    pool_->state().total_in_flight.fetch_add(1, std::memory_order_relaxed);
    counted_ = true;
    if (BackendConn* idle = st.pop_idle()) {
      conn_ = idle;
      conn_->attach(this);
      backend_ready();
      return;
    }
    int err = 0;
    conn_ = BackendConn::connect(worker_, st, this, &err);
    if (conn_ == nullptr) {
      worker_.log().log_limited(Level::kError, worker_.now_ms(), "backend_socket_failed",
                                uv_err_name(err));
      attempt_failed(true, Reject::kBackendError, 502);
      return;
    }
    conn_->arm_timer(pool_->config().connect_timeout_ms);
    return;
  }
}

void ClientSession::release_attempt() noexcept {
  if (!counted_) return;
  counted_ = false;
  pool_->backend(backend_).in_flight.fetch_sub(1, std::memory_order_relaxed);
  pool_->state().total_in_flight.fetch_sub(1, std::memory_order_relaxed);
}

void ClientSession::on_backend_connected(BackendConn* conn, int status) noexcept {
  if (conn != conn_ || closing()) return;
  if (status != 0) {
    worker_.log().log_limited(Level::kWarn, worker_.now_ms(), "backend_connect_failed",
                              "backend=" + pool_->backend(backend_).id() + " error=" +
                                  uv_err_name(status));
    attempt_failed(true, Reject::kBackendError, 502);
    return;
  }
  backend_ready();
}

void ClientSession::backend_ready() noexcept {
  const auto& head = req_parser_.head();
  phase_ = Phase::kExchange;
  req_head_out_.clear();
  http::ForwardRequest fwd;
  fwd.client_ip = std::string_view(client_ip_, client_ip_len_);
  http::write_request_head(head, fwd, req_head_out_);
  to_backend_.push(req_head_out_.data(), req_head_out_.size());
  resp_parser_.begin(head.is_head);
  conn_->arm_timer(pool_->config().backend_io_timeout_ms);
  if (head.expect_continue && head.framing != http::Framing::kNone && !sent_continue_ &&
      head.version_minor >= 1) {
    sent_continue_ = true;
    to_client_.push(k100Continue.data(), k100Continue.size());
    if (!flush_to_client()) {
      if (closing()) return;
    }
  }
  if (req_done_) {
    // A retry of a request already read whole (no body): send the head again.
    if (flush_to_backend()) conn_->arm_timer(pool_->config().response_header_timeout_ms);
    return;
  }
  arm_client_timer();
  pump_request();
}

bool ClientSession::may_retry() const noexcept {
  if (resp_started_ || resp_head_seen_) return false;
  if (!req_bytes_sent_) return true;
  const auto& head = req_parser_.head();
  // Something was sent: only a bodiless idempotent request may go again (never a POST).
  return head.idempotent && head.framing == http::Framing::kNone && req_done_;
}

void ClientSession::attempt_failed(bool connect_failure, Reject reason, uint16_t status) noexcept {
  BackendState& st = pool_->backend(backend_);
  if (connect_failure) {
    st.counters.connect_errors.fetch_add(1, std::memory_order_relaxed);
  } else if (reason == Reject::kTimeout) {
    st.counters.timeouts.fetch_add(1, std::memory_order_relaxed);
  } else {
    st.counters.errors.fetch_add(1, std::memory_order_relaxed);
  }
  if (st.note_failure(pool_->config().passive.consecutive_failures)) {
    // Passive ejection; the health module brings it back after the cool-down.
    uint32_t unusable = pool_->state().unusable.load(std::memory_order_relaxed);
    uint64_t limit = pool_->size() * pool_->config().passive.max_ejected_percent / 100;
    if (st.usable() && unusable < limit) {
      st.set_health(Health::kEjected);
      st.ejected_until_ms = worker_.now_ms() + pool_->config().passive.ejection_ms;
      pool_->state().unusable.fetch_add(1, std::memory_order_relaxed);
      worker_.log().log(Level::kWarn, "backend_ejected",
                        "pool=" + pool_->name() + " backend=" + st.id());
    }
  }
  drop_backend(false);
  release_attempt();
  core::bit_set(std::span<uint64_t>(tried_.data(), pool_->excluded_words()), backend_);
  bool can = may_retry() && attempts_ <= pool_->config().retries;
  if (can) {
    worker_.stats().retries.fetch_add(1, std::memory_order_relaxed);
    st.counters.retries.fetch_add(1, std::memory_order_relaxed);
    to_backend_.clear();
    if (to_backend_.pending) {
      retry_after_write_ = true;
      return;
    }
    start_attempt();
    return;
  }
  fail_exchange(status, reason, reason == Reject::kTimeout ? Outcome::kTimeout
                                                           : Outcome::kBackendError);
}

void ClientSession::on_backend_data(BackendConn* conn) noexcept {
  if (conn != conn_ || closing()) return;
  pump_response();
}

void ClientSession::on_backend_eof(BackendConn* conn, int) noexcept {
  if (conn != conn_ || closing()) return;
  backend_reusable_ = false;
  pump_response();
}

void ClientSession::on_backend_timeout(BackendConn* conn) noexcept {
  if (conn != conn_ || closing()) return;
  if (phase_ == Phase::kConnecting) {
    worker_.log().log_limited(Level::kWarn, worker_.now_ms(), "backend_connect_timeout",
                              "backend=" + pool_->backend(backend_).id());
    attempt_failed(true, Reject::kTimeout, 504);
  } else if (!resp_head_seen_) {
    worker_.log().log_limited(Level::kWarn, worker_.now_ms(), "backend_timeout",
                              "backend=" + pool_->backend(backend_).id());
    attempt_failed(false, Reject::kTimeout, 504);
  } else {
    pool_->backend(backend_).counters.timeouts.fetch_add(1, std::memory_order_relaxed);
    fail_exchange(504, Reject::kTimeout, Outcome::kTimeout);
  }
}

void ClientSession::pump_response() noexcept {
  const auto& req = req_parser_.head();
  for (;;) {
    if (closing() || conn_ == nullptr || !in_exchange()) return;
    if (to_client_.pending) {
      conn_->pause_reading();
      return;
    }
    if (resp_complete_) return;
    size_t avail = conn_->available();
    http::Step st = resp_parser_.feed(avail > 0 ? conn_->data() : nullptr, avail);
    conn_->consume(st.consumed);
    switch (st.event) {
      case http::Event::kNeedMore: {
        // Everything received so far is parsed: write it out, then read more (or end on EOF).
        if (!flush_to_client()) return;
        if (!conn_->eof()) {
          conn_->resume_reading();
          return;
        }
        if (!resp_head_seen_) {
          attempt_failed(false, Reject::kBackendError, 502);
          return;
        }
        http::Step fin = resp_parser_.finish();
        if (fin.event != http::Event::kMessageEnd) {
          worker_.log().log_limited(Level::kWarn, worker_.now_ms(), "backend_response_truncated",
                                    "backend=" + pool_->backend(backend_).id());
          fail_exchange(502, Reject::kBackendError, Outcome::kBackendError);
          return;
        }
        if (client_framing_.framing == http::Framing::kChunked) {
          to_client_.push(http::kLastChunk.data(), http::kLastChunk.size());
        }
        resp_complete_ = true;
        if (flush_to_client()) response_done();
        return;
      }
      case http::Event::kHead: {
        const auto& rh = resp_parser_.head();
        if (rh.status < 200) {
          in_interim_ = true;
          if (rh.status == 100 && sent_continue_) break;  // rondel already said 100 Continue
          if (!flush_to_client()) return;  // the interim head string is reused
          resp_head_out_.clear();
          http::write_interim_head(rh, resp_head_out_);
          to_client_.push(resp_head_out_.data(), resp_head_out_.size());
          resp_started_ = true;
          if (!flush_to_client()) return;
          break;
        }
        resp_head_seen_ = true;
        status_ = rh.status;
        client_framing_ = http::choose_client_framing(req, rh);
        // A final response before the request body ended: the rest of the body will not be
        // forwarded, so the connection ends after this response (see response_done); say so.
        if (close_after_ || worker_.draining() || !req_done_) client_framing_.close_after = true;
        if (client_framing_.close_after) close_after_ = true;
        if (!rh.keep_alive) backend_reusable_ = false;
        resp_head_out_.clear();
        http::write_response_head(req, rh, client_framing_, resp_head_out_);
        to_client_.push(resp_head_out_.data(), resp_head_out_.size());
        resp_started_ = true;
        conn_->arm_timer(pool_->config().backend_io_timeout_ms);
        BackendState& bs = pool_->backend(backend_);
        if (rh.status >= 500) {
          bs.note_failure(0);
        } else {
          bs.note_success();
        }
        break;
      }
      case http::Event::kBody:
        if (client_framing_.framing == http::Framing::kChunked) {
          if (!to_client_.room(3) && !flush_to_client()) return;
          to_client_.push_chunk_header(st.body.size());
          to_client_.push(st.body.data(), st.body.size());
          to_client_.push(http::kChunkTrailer.data(), http::kChunkTrailer.size());
        } else {
          if (!to_client_.room(1) && !flush_to_client()) return;
          to_client_.push(st.body.data(), st.body.size());
        }
        if (!to_client_.room(3) && !flush_to_client()) return;
        break;
      case http::Event::kMessageEnd:
        if (in_interim_) {
          in_interim_ = false;
          resp_parser_.begin(req.is_head);
          break;
        }
        if (client_framing_.framing == http::Framing::kChunked) {
          to_client_.push(http::kLastChunk.data(), http::kLastChunk.size());
        }
        resp_complete_ = true;
        if (conn_->available() > 0) backend_reusable_ = false;  // bytes after the response
        conn_->pause_reading();
        if (flush_to_client()) response_done();
        return;
      case http::Event::kError:
        worker_.log().log_limited(Level::kWarn, worker_.now_ms(), "backend_bad_response",
                                  "backend=" + pool_->backend(backend_).id() + " reason=" +
                                      std::string(resp_parser_.error().reason));
        backend_reusable_ = false;
        if (!resp_head_seen_ && !resp_started_) {
          fail_exchange(502, Reject::kBackendError, Outcome::kBackendError);
        } else {
          fail_exchange(502, Reject::kBackendError, Outcome::kBackendError);
        }
        return;
    }
  }
}

void ClientSession::response_done() noexcept {
  if (!in_exchange() || !resp_complete_) return;
  if (!req_done_) {
    // The backend answered before the request body ended: stop forwarding and close. Do not
    // wait for a pending body write: a backend that answers without reading the body may never
    // read it, and the write would hold the exchange until the I/O timeout. Closing the backend
    // connection (finish_exchange) cancels the write; its callback only clears the queue.
    close_after_ = true;
    backend_reusable_ = false;
  } else if (to_backend_.pending) {
    return;  // on_backend_written calls back here
  }
  finish_exchange(Outcome::kOk);
}

void ClientSession::fail_exchange(uint16_t status, Reject reason, Outcome outcome) noexcept {
  worker_.stats().rejected[static_cast<size_t>(reason)].fetch_add(1, std::memory_order_relaxed);
  backend_reusable_ = false;
  if (!resp_started_ && !to_client_.pending) {
    status_ = status;
    to_client_.clear();
    std::string_view resp = http::canned_response(status);
    to_client_.push(resp.data(), resp.size());
    resp_started_ = true;
    close_after_ = true;
    close_after_flush_ = true;
    finish_exchange(outcome);
    if (closing()) return;
    if (flush_to_client()) linger_close();
    return;
  }
  // Part of the response already went out: the only honest signal left is closing.
  if (status_ == 0) status_ = status;
  finish_exchange(outcome);
  close_now();
}

void ClientSession::drop_backend(bool reusable) noexcept {
  if (conn_ == nullptr) return;
  BackendConn* c = conn_;
  conn_ = nullptr;
  if (reusable && !c->eof() && c->available() == 0) {
    c->release_to_idle(pool_->config().backend_idle_timeout_ms);
  } else {
    c->close();
  }
}

void ClientSession::finish_exchange(Outcome outcome) noexcept {
  if (!in_exchange()) return;
  bool reusable = outcome == Outcome::kOk && backend_reusable_ && req_done_ && resp_complete_;
  drop_backend(reusable);
  if (backend_ != core::kNoBackend && pool_ != nullptr) {
    BackendState& st = pool_->backend(backend_);
    st.counters.requests.fetch_add(1, std::memory_order_relaxed);
    if (status_ >= 500) st.counters.responses_5xx.fetch_add(1, std::memory_order_relaxed);
    else if (status_ >= 400) st.counters.responses_4xx.fetch_add(1, std::memory_order_relaxed);
    else if (status_ >= 300) st.counters.responses_3xx.fetch_add(1, std::memory_order_relaxed);
    else if (status_ >= 200) st.counters.responses_2xx.fetch_add(1, std::memory_order_relaxed);
    if (owner_ != core::kNoBackend && owner_ != backend_ && keyed_) {
      st.counters.spill_in.fetch_add(1, std::memory_order_relaxed);
      pool_->state().spilled.fetch_add(1, std::memory_order_relaxed);
    }
  }
  release_attempt();
  log_access(outcome);
  if (worker_.on_exchange != nullptr && pool_ != nullptr) {
    ExchangeRecord rec;
    rec.pool = pool_;
    rec.backend = backend_;
    rec.owner = owner_;
    rec.status = status_;
    rec.hops = hops_;
    rec.duration_us = (uv_hrtime() - start_ns_) / 1000;
    rec.bytes_in = bytes_from_client_;
    rec.bytes_out = bytes_to_client_;
    rec.key = key_;
    worker_.on_exchange(worker_.on_exchange_ctx, rec);
  }
  bytes_from_client_ = bytes_to_client_ = 0;
  phase_ = Phase::kIdle;
  if (outcome != Outcome::kOk) {
    close_after_ = true;
    return;  // the caller closes (after flushing an error response, if any)
  }
  if (close_after_ || client_eof_ || worker_.draining()) {
    close_after_flush_ = true;
    if (flush_to_client()) linger_close();
    return;
  }
  // Keep-alive: parse the next (possibly already pipelined) request.
  head_known_ = false;
  req_parser_.reset();
  backend_ = owner_ = core::kNoBackend;
  arm_client_timer();
  pump_request();
}

void ClientSession::log_access(Outcome outcome, bool head_known) noexcept {
  LogSink& sink = worker_.access_log();
  if (!sink.enabled()) return;
  const auto& head = req_parser_.head();
  std::string_view method = head_known ? std::string_view(head.method) : "-";
  std::string_view target = head_known ? std::string_view(head.target) : "-";
  std::string& l = access_line_;
  l.clear();
  char num[32];
  auto add_num = [&](std::string_view k, uint64_t v) {
    l += ' ';
    l += k;
    l += '=';
    int n = std::snprintf(num, sizeof num, "%llu", static_cast<unsigned long long>(v));
    l.append(num, static_cast<size_t>(n));
  };
  l += "access client=";
  l.append(client_ip_, client_ip_len_);
  l += " method=";
  l += method;
  l += " target=";
  l += target;
  add_num("status", status_);
  add_num("bytes_in", bytes_from_client_);
  add_num("bytes_out", bytes_to_client_);
  l += " pool=";
  if (pool_ != nullptr) l += pool_->name();
  else if (route_.pool != nullptr) l += route_.pool->name();  // refused before any exchange
  l += " backend=";
  if (backend_ != core::kNoBackend) l += pool_->backend(backend_).id();
  else l += '-';
  l += " owner=";
  if (owner_ != core::kNoBackend && keyed_) l += pool_->backend(owner_).id();
  else l += '-';
  add_num("hops", hops_);
  add_num("attempts", attempts_);
  add_num("duration_us", (uv_hrtime() - start_ns_) / 1000);
  static constexpr std::string_view kOutcome[] = {"ok", "client_abort", "backend_error",
                                                  "timeout", "rejected"};
  l += " outcome=";
  l += kOutcome[static_cast<int>(outcome)];
  l += '\n';
  sink.write(l);
}

}  // namespace rondel::proxy
