// ClientSession, exchange side: picking a backend (bounded loads), connecting or reusing a
// pooled connection, forwarding the request, streaming the response back, retries and the end
// of an exchange (in-flight decrement, counters, metrics hook). The client side is session.cpp.
#include <cstring>

#include "rondel/core/bitset.h"
#include "rondel/core/hash.h"
#include "rondel/http/writer.h"
#include "rondel/proxy/backend_conn.h"
#include "rondel/proxy/hash_key.h"
#include "rondel/proxy/session.h"

namespace rondel::proxy {

namespace {

constexpr std::string_view k100Continue = "HTTP/1.1 100 Continue\r\n\r\n";

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

bool ClientSession::flush_to_backend() noexcept {
  if (xb_->to_backend.pending) return false;
  if (xb_->to_backend.n == 0) return true;
  req_bytes_sent_ = true;
  BackendState& st = pool_->backend(backend_);
  st.counters.bytes_out.fetch_add(xb_->to_backend.bytes, std::memory_order_relaxed);
  int r = xb_->to_backend.flush(conn_->stream(), &on_backend_written);
  if (r < 0) {
    xb_->to_backend.clear();
    attempt_failed(false, Reject::kBackendError, 502);
    return false;
  }
  if (r > 0) {
    set_client_reading(false);
    return false;
  }
  return true;
}

void ClientSession::on_backend_written(uv_write_t* req, int status) noexcept {
  auto* s = static_cast<ClientSession*>(req->data);
  s->xb_->to_backend.pending = false;
  s->xb_->to_backend.clear();
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
    if (s->resp_complete_ && !s->xb_->to_client.pending) s->response_done();
    return;
  }
  s->arm_client_timer();
  s->pump_request();
}

// ---------------------------------------------------------------------------------------------
// Exchange

void ClientSession::on_request_head() noexcept {
  const auto& head = xb_->req_parser.head();
  if (worker_.snapshot() != snap_) {
    // Between requests: move to the newest configuration.
    snap_ = worker_.snapshot();
    route_ = snap_->route(listener_);
    if (xb_->tried.size() < snap_->max_scratch_words()) xb_->tried.assign(snap_->max_scratch_words(), 0);
  }
  set_client_reading(false, /*lazy=*/true);
  deadline_.clear();
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
  std::fill(xb_->tried.begin(), xb_->tried.end(), 0);

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
  worker_.exchange_started();
  start_attempt();
}

void ClientSession::start_attempt() noexcept {
  ++attempts_;
  phase_ = Phase::kConnecting;
  std::span<uint64_t> tried(xb_->tried.data(), pool_->excluded_words());
  bool first_pick = attempts_ == 1;  // the routing decision; retries and re-walks are not
  for (;;) {
    core::BackendIndex b = core::kNoBackend;
    if (keyed_) {
      core::RouteResult rr = worker_.routing().route(*pool_, hash_, key_, tried,
                                                     worker_.scratch(pool_->scratch_words()),
                                                     worker_.now_ms(), first_pick);
      first_pick = false;
      reason_ = static_cast<uint8_t>(rr.reason);
      const core::PickResult& r = rr.pick;
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
    if (max_conns != 0 && st.idle_count(worker_.id()) == 0 &&
        st.open_connections.load(std::memory_order_relaxed) >= max_conns) {
      // At its connection limit: treat like a full backend and walk on.
      core::bit_set(tried, b);
      continue;
    }
    backend_ = b;
    st.in_flight.fetch_add(1, std::memory_order_relaxed);
    pool_->state().total_in_flight.fetch_add(1, std::memory_order_relaxed);
    counted_ = true;
    if (BackendConn* idle = st.pop_idle(worker_.id())) {
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
  const auto& head = xb_->req_parser.head();
  phase_ = Phase::kExchange;
  xb_->req_head_out.clear();
  http::ForwardRequest fwd;
  fwd.client_ip = std::string_view(client_ip_, client_ip_len_);
  http::write_request_head(head, fwd, xb_->req_head_out);
  xb_->to_backend.push(xb_->req_head_out.data(), xb_->req_head_out.size());
  xb_->resp_parser.begin(head.is_head);
  conn_->arm_timer(pool_->config().backend_io_timeout_ms);
  if (head.expect_continue && head.framing != http::Framing::kNone && !sent_continue_ &&
      head.version_minor >= 1) {
    sent_continue_ = true;
    xb_->to_client.push(k100Continue.data(), k100Continue.size());
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
  const auto& head = xb_->req_parser.head();
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
    if (unusable < limit && st.change_health(Health::kUp, Health::kEjected)) {
      st.ejected_until_ms = worker_.now_ms() + pool_->config().passive.ejection_ms;
      pool_->state().unusable.fetch_add(1, std::memory_order_relaxed);
      worker_.log().log(Level::kWarn, "backend_ejected",
                        "pool=" + pool_->name() + " backend=" + st.id());
    }
  }
  drop_backend(false);
  release_attempt();
  core::bit_set(std::span<uint64_t>(xb_->tried.data(), pool_->excluded_words()), backend_);
  bool can = may_retry() && attempts_ <= pool_->config().retries;
  if (can) {
    worker_.stats().retries.fetch_add(1, std::memory_order_relaxed);
    st.counters.retries.fetch_add(1, std::memory_order_relaxed);
    xb_->to_backend.clear();
    if (xb_->to_backend.pending) {
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
  const auto& req = xb_->req_parser.head();
  for (;;) {
    if (closing() || conn_ == nullptr || !in_exchange()) return;
    if (xb_->to_client.pending) {
      conn_->pause_reading();
      return;
    }
    if (resp_complete_) return;
    size_t avail = conn_->available();
    http::Step st = xb_->resp_parser.feed(avail > 0 ? conn_->data() : nullptr, avail);
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
        http::Step fin = xb_->resp_parser.finish();
        if (fin.event != http::Event::kMessageEnd) {
          worker_.log().log_limited(Level::kWarn, worker_.now_ms(), "backend_response_truncated",
                                    "backend=" + pool_->backend(backend_).id());
          fail_exchange(502, Reject::kBackendError, Outcome::kBackendError);
          return;
        }
        if (client_framing_.framing == http::Framing::kChunked) {
          xb_->to_client.push(http::kLastChunk.data(), http::kLastChunk.size());
        }
        resp_complete_ = true;
        if (flush_to_client()) response_done();
        return;
      }
      case http::Event::kHead: {
        const auto& rh = xb_->resp_parser.head();
        if (rh.status < 200) {
          in_interim_ = true;
          if (rh.status == 100 && sent_continue_) break;  // rondel already said 100 Continue
          if (!flush_to_client()) return;  // the interim head string is reused
          xb_->resp_head_out.clear();
          http::write_interim_head(rh, xb_->resp_head_out);
          xb_->to_client.push(xb_->resp_head_out.data(), xb_->resp_head_out.size());
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
        xb_->resp_head_out.clear();
        http::write_response_head(req, rh, client_framing_, xb_->resp_head_out);
        xb_->to_client.push(xb_->resp_head_out.data(), xb_->resp_head_out.size());
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
          if (!xb_->to_client.room(3) && !flush_to_client()) return;
          xb_->to_client.push_chunk_header(st.body.size());
          xb_->to_client.push(st.body.data(), st.body.size());
          xb_->to_client.push(http::kChunkTrailer.data(), http::kChunkTrailer.size());
        } else {
          if (!xb_->to_client.room(1) && !flush_to_client()) return;
          xb_->to_client.push(st.body.data(), st.body.size());
        }
        if (!xb_->to_client.room(3) && !flush_to_client()) return;
        break;
      case http::Event::kMessageEnd:
        if (in_interim_) {
          in_interim_ = false;
          xb_->resp_parser.begin(req.is_head);
          break;
        }
        if (client_framing_.framing == http::Framing::kChunked) {
          xb_->to_client.push(http::kLastChunk.data(), http::kLastChunk.size());
        }
        resp_complete_ = true;
        if (conn_->available() > 0) backend_reusable_ = false;  // bytes after the response
        conn_->expect_no_more();
        if (flush_to_client()) response_done();
        return;
      case http::Event::kError:
        worker_.log().log_limited(Level::kWarn, worker_.now_ms(), "backend_bad_response",
                                  "backend=" + pool_->backend(backend_).id() + " reason=" +
                                      std::string(xb_->resp_parser.error().reason));
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
  } else if (xb_->to_backend.pending) {
    return;  // on_backend_written calls back here
  }
  finish_exchange(Outcome::kOk);
}

void ClientSession::fail_exchange(uint16_t status, Reject reason, Outcome outcome) noexcept {
  worker_.stats().rejected[static_cast<size_t>(reason)].fetch_add(1, std::memory_order_relaxed);
  backend_reusable_ = false;
  if (!resp_started_ && !xb_->to_client.pending) {
    status_ = status;
    xb_->to_client.clear();
    std::string_view resp = http::canned_response(status);
    xb_->to_client.push(resp.data(), resp.size());
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
  // Pool it only while this worker holds fewer than max_idle_per_backend idle connections to
  // that backend (0 = keep none).
  if (reusable && c->clean() && c->state() != nullptr &&
      c->state()->idle_count(worker_.id()) < pool_->config().max_idle_per_backend) {
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
    rec.hash = hash_;
    rec.keyed = keyed_;
    rec.reason = reason_;
    worker_.on_exchange(worker_.on_exchange_ctx, rec);
  }
  bytes_from_client_ = bytes_to_client_ = 0;
  phase_ = Phase::kIdle;
  worker_.exchange_ended();
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
  xb_->req_parser.reset();
  backend_ = owner_ = core::kNoBackend;
  arm_client_timer();
  pump_request();
}

}  // namespace rondel::proxy
