// ClientSession, exchange side: picking a backend (bounded loads), connecting or reusing a
// pooled connection, forwarding the request, the attempt's one exit (counters, passive health,
// in-flight slot), retries and the end of an exchange (counters, metrics hook). Streaming the
// response back is exchange_response.cpp; the client side is session.cpp.
#include <cstring>

#include "rondel/core/bitset.h"
#include "rondel/core/hash.h"
#include "rondel/http/writer.h"
#include "rondel/proxy/backend_conn.h"
#include "rondel/proxy/passive_health.h"
#include "rondel/proxy/router.h"
#include "rondel/proxy/session.h"

namespace rondel::proxy {

namespace {

constexpr std::string_view k100Continue = "HTTP/1.1 100 Continue\r\n\r\n";

}  // namespace

bool ClientSession::flush_to_backend() noexcept {
  if (xb_->to_backend.pending) return false;
  if (xb_->to_backend.n == 0) return true;
  BackendState& st = ex().pool->backend(ex().backend);
  st.counters.bytes_out.fetch_add(xb_->to_backend.bytes, std::memory_order_relaxed);
  int r = xb_->to_backend.flush(ex().conn->stream(), &on_backend_written);
  if (r < 0) {
    xb_->to_backend.clear();
    attempt_failed(AttemptEnd::kFailed, Reject::kBackendError, 502);
    return false;
  }
  // Only bytes the socket took count as sent: a write refused outright left the request unsent.
  if (xb_->to_backend.sent_now > 0) {
    ex().req_bytes_sent = true;
    backend_progress();
  }
  if (r > 0) {
    // Waiting on the backend to take the body: rondel stops reading the client, and the client's
    // body timeout does not run meanwhile (the stall is the backend's, not the client's).
    set_client_reading(false);
    worker_.timeouts().clear(*this);
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
  if (s->retry_after_write_ != PendingRetry::kNone) {
    PendingRetry retry = s->retry_after_write_;
    s->retry_after_write_ = PendingRetry::kNone;
    if (retry == PendingRetry::kSameBackend) {
      s->begin_attempt(s->ex().backend, ConnSource::kNew);
    } else {
      s->start_attempt();
    }
    return;
  }
  if (status < 0) {
    if (s->ex().conn != nullptr && s->in_exchange()) {
      s->attempt_failed(AttemptEnd::kFailed, Reject::kBackendError, 502);
    }
    return;
  }
  if (!s->in_exchange()) return;
  if (s->ex().conn != nullptr) s->ex().req_bytes_sent = true;
  s->backend_progress();
  if (s->ex().conn != nullptr && !s->ex().resp_head_seen() && s->ex().req_done()) {
    s->ex().conn->arm_timer(s->ex().pool->config().response_header_timeout_ms);
  }
  if (s->ex().req_done()) {
    if (s->ex().resp_complete() && !s->xb_->to_client.pending) s->response_done();
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
    ListenerRoute r = listener_state_ ? snap_->route(listener_state_->name) : ListenerRoute{};
    listener_cfg_ = r.config;
    listener_pool_ = r.pool;
    if (xb_->tried.size() < snap_->max_scratch_words()) xb_->tried.assign(snap_->max_scratch_words(), 0);
  }
  set_client_reading(false, /*lazy=*/true);
  worker_.timeouts().clear(*this);
  head_timer_armed_ = false;
  head_known_ = true;
  // A new request: nothing of the previous one survives (its pool may be gone with the old
  // snapshot). No slot is held here: the previous exchange ended.
  ex() = Exchange{};
  ex().start_ns = uv_hrtime();
  worker_.stats().requests.fetch_add(1, std::memory_order_relaxed);
  if (listener_cfg_ == nullptr || listener_pool_ == nullptr) {
    reject(503, Reject::kNoBackend, "listener_removed");
    return;
  }
  ex().pool = listener_pool_;
  ex().pool->state().requests.fetch_add(1, std::memory_order_relaxed);
  std::fill(xb_->tried.begin(), xb_->tried.end(), 0);

  const config::PoolConfig& pc = ex().pool->config();
  const uint64_t random = pc.missing_key == config::MissingKeyPolicy::kRandom
                              ? core::mix64(uv_hrtime(), reinterpret_cast<uintptr_t>(this))
                              : 0;
  const RouteKey rk = route_key(pc, head, client_ip(), random);
  if (rk.kind == RouteKey::Kind::kReject) {
    reject(400, Reject::kBadRequest, "missing_hash_key");
    return;
  }
  ex().keyed = rk.walks();
  ex().key = rk.key;
  ex().hash = rk.hash;
  phase_ = Phase::kConnecting;
  worker_.exchange_started();
  start_attempt();
}

core::BackendIndex ClientSession::route_attempt(bool first_pick) noexcept {
  PickRequest rq;
  rq.key = RouteKey::of(ex().keyed, ex().key, ex().hash);
  rq.tried = std::span<const uint64_t>(xb_->tried.data(), ex().pool->excluded_words());
  rq.kind = first_pick ? core::PickKind::kFirst : core::PickKind::kRetry;
  rq.now_ms = worker_.now_ms();
  rq.worker = worker_.id();
  // One call: hash policy state, the bounded-load walk with backends at their connection limit
  // excluded, and the decision counters (routed, all_full, no_backend) are the Router's.
  const RouteDecision d =
      worker_.routing().route(*ex().pool, rq, worker_.scratch(ex().pool->scratch_words()));
  ex().reason = static_cast<uint8_t>(d.reason);
  ex().owner = d.owner;
  ex().hops = d.hops;  // this walk passes over the backends already tried too: assign
  return d.backend;
}

void ClientSession::start_attempt() noexcept {
  bool first_pick = ex().attempts == 0;  // the routing decision; retries and re-walks are not
  core::BackendIndex b = route_attempt(first_pick);
  if (b == core::kNoBackend) {
    ++ex().attempts;
    fail_exchange(503, Reject::kNoBackend, Outcome::kRejected);
    return;
  }
  begin_attempt(b, ConnSource::kIdleOrNew);
}

void ClientSession::begin_attempt(core::BackendIndex b, ConnSource source) noexcept {
  ++ex().attempts;
  phase_ = Phase::kConnecting;
  ex().backend = b;
  ex().req_bytes_sent = ex().resp_bytes_seen = false;
  BackendState& st = ex().pool->backend(b);
  ex().slot = InFlightSlot::take(st.in_flight, ex().pool->state().total_in_flight);
  if (source == ConnSource::kIdleOrNew) {
    if (BackendConn* idle = st.pop_idle(worker_.id())) {
      ex().conn = idle;
      ex().conn->attach(this);
      backend_ready();
      return;
    }
  }
  int err = 0;
  ex().conn = BackendConn::connect(worker_, st, this, &err);
  if (ex().conn == nullptr) {
    worker_.log().log_limited(Level::kError, worker_.now_ms(), "backend_socket_failed",
                              uv_err_name(err));
    attempt_failed(AttemptEnd::kConnectFailed, Reject::kBackendError, 502);
    return;
  }
  ex().conn->arm_timer(ex().pool->config().connect_timeout_ms);
}

void ClientSession::end_attempt(AttemptEnd end) noexcept {
  if (!ex().slot.held()) return;
  bool reusable = end == AttemptEnd::kServed && ex().backend_reusable && ex().req_done() &&
                  ex().resp_complete();
  drop_backend(reusable);
  BackendState& st = ex().pool->backend(ex().backend);
  switch (end) {
    case AttemptEnd::kConnectFailed:
      st.counters.connect_errors.fetch_add(1, std::memory_order_relaxed);
      break;
    case AttemptEnd::kTimedOut:
      st.counters.timeouts.fetch_add(1, std::memory_order_relaxed);
      break;
    case AttemptEnd::kFailed:
      st.counters.errors.fetch_add(1, std::memory_order_relaxed);
      break;
    case AttemptEnd::kServed:
    case AttemptEnd::kStale:
      break;
  }
  note_passive_health(st, end);
  ex().slot.release();
}

void ClientSession::note_passive_health(BackendState& st, AttemptEnd end) noexcept {
  if (end == AttemptEnd::kStale) return;  // the backend closed an idle connection: no failure
  if (end == AttemptEnd::kServed) {
    if (!ex().resp_head_seen()) return;  // the client left before the backend answered
    if (ex().status < 500) {
      PassiveHealth::note_success(st);
      return;
    }
  }
  // A failed attempt, or a 5xx response: PassiveHealth counts it and owns the ejection.
  PassiveHealth::note_failure(*ex().pool, ex().backend, worker_.now_ms(), worker_.log());
}

void ClientSession::on_backend_connected(BackendConn* conn, int status) noexcept {
  if (conn != ex().conn || closing()) return;
  if (status != 0) {
    worker_.log().log_limited(Level::kWarn, worker_.now_ms(), "backend_connect_failed",
                              "backend=" + ex().pool->backend(ex().backend).id() + " error=" +
                                  uv_err_name(status));
    attempt_failed(AttemptEnd::kConnectFailed, Reject::kBackendError, 502);
    return;
  }
  backend_ready();
}

void ClientSession::backend_ready() noexcept {
  const auto& head = xb_->req_parser.head();
  phase_ = Phase::kExchange;
  xb_->req_head_out.clear();
  http::ForwardRequest fwd;
  fwd.client_ip = client_ip();
  fwd.forwarded = listener_cfg_->forwarded_headers;
  if (tls_) fwd.proto = "https";
  http::write_request_head(head, fwd, xb_->req_head_out);
  xb_->to_backend.push(xb_->req_head_out.data(), xb_->req_head_out.size());
  xb_->resp_parser.begin(head.is_head);
  ex().conn->arm_timer(ex().pool->config().backend_io_timeout_ms);
  if (head.expect_continue && head.framing != http::Framing::kNone && !ex().sent_continue &&
      head.version_minor >= 1) {
    ex().sent_continue = true;
    xb_->to_client.push(k100Continue.data(), k100Continue.size());
    if (!flush_to_client()) {
      if (closing()) return;
    }
  }
  if (ex().req_done()) {
    // A retry of a request already read whole (no body): send the head again.
    if (flush_to_backend()) ex().conn->arm_timer(ex().pool->config().response_header_timeout_ms);
    return;
  }
  arm_client_timer();
  pump_request();
}

void ClientSession::attempt_failed(AttemptEnd end, Reject reason, uint16_t status) noexcept {
  const auto& head = xb_->req_parser.head();
  end = classify_failure(ex(), head, end, ex().conn != nullptr && ex().conn->reused());
  end_attempt(end);
  xb_->to_backend.clear();
  AfterFailure next = after_failure(ex(), head, end, ex().pool->config().retries);
  if (next == AfterFailure::kSameBackend) {
    // Once, on a fresh connection to the same backend: not a failure, not a spill.
    ex().stale_retried = true;
    if (xb_->to_backend.pending) {
      retry_after_write_ = PendingRetry::kSameBackend;
      return;
    }
    begin_attempt(ex().backend, ConnSource::kNew);
    return;
  }
  BackendState& st = ex().pool->backend(ex().backend);
  core::bit_set(std::span<uint64_t>(xb_->tried.data(), ex().pool->excluded_words()), ex().backend);
  if (next == AfterFailure::kNextBackend) {
    worker_.stats().retries.fetch_add(1, std::memory_order_relaxed);
    st.counters.retries.fetch_add(1, std::memory_order_relaxed);
    if (xb_->to_backend.pending) {
      retry_after_write_ = PendingRetry::kRepick;
      return;
    }
    start_attempt();
    return;
  }
  fail_exchange(status, reason, reason == Reject::kTimeout ? Outcome::kTimeout
                                                           : Outcome::kBackendError);
}

void ClientSession::on_backend_timeout(BackendConn* conn) noexcept {
  if (conn != ex().conn || closing()) return;
  if (phase_ == Phase::kConnecting) {
    worker_.log().log_limited(Level::kWarn, worker_.now_ms(), "backend_connect_timeout",
                              "backend=" + ex().pool->backend(ex().backend).id());
    attempt_failed(AttemptEnd::kConnectFailed, Reject::kTimeout, 504);
  } else {
    worker_.log().log_limited(Level::kWarn, worker_.now_ms(), "backend_timeout",
                              "backend=" + ex().pool->backend(ex().backend).id());
    attempt_failed(AttemptEnd::kTimedOut, Reject::kTimeout, 504);  // after the head: a close
  }
}

void ClientSession::backend_progress() noexcept {
  if (ex().conn == nullptr || phase_ != Phase::kExchange) return;
  // Before the response head, once the request is sent, the response-header timeout runs.
  if (ex().resp_head_seen() || !ex().req_done()) {
    ex().conn->arm_timer(ex().pool->config().backend_io_timeout_ms);
  }
}

void ClientSession::fail_exchange(uint16_t status, Reject reason, Outcome outcome) noexcept {
  worker_.stats().rejected[static_cast<size_t>(reason)].fetch_add(1, std::memory_order_relaxed);
  ex().backend_reusable = false;
  if (!ex().resp_started() && !xb_->to_client.pending) {
    ex().status = status;
    xb_->to_client.clear();
    std::string_view resp = http::canned_response(status);
    xb_->to_client.push(resp.data(), resp.size());
    ex().response = ResponseState::kLocal;
    close_after_ = true;
    close_after_flush_ = true;
    finish_exchange(outcome);
    if (closing()) return;
    if (flush_to_client()) linger_close();
    return;
  }
  // Part of the response already went out: the only honest signal left is closing.
  if (ex().status == 0) ex().status = status;
  finish_exchange(outcome);
  close_now();
}

void ClientSession::drop_backend(bool reusable) noexcept {
  if (ex().conn == nullptr) return;
  BackendConn* c = ex().conn;
  ex().conn = nullptr;
  // Pool it only while this worker holds fewer than max_idle_per_backend idle connections to
  // that backend (0 = keep none).
  if (reusable && c->clean() && c->state() != nullptr &&
      c->state()->idle_count(worker_.id()) < ex().pool->config().max_idle_per_backend) {
    c->release_to_idle(ex().pool->config().backend_idle_timeout_ms);
  } else {
    c->close();
  }
}

void ClientSession::finish_exchange(Outcome outcome) noexcept {
  if (!in_exchange()) return;
  bool on_backend = counts_on_backend(ex());
  if (ex().backend != core::kNoBackend && ex().pool != nullptr) {
    BackendState& st = ex().pool->backend(ex().backend);
    if (on_backend) {
      st.counters.requests.fetch_add(1, std::memory_order_relaxed);
      if (ex().status >= 500) st.counters.responses_5xx.fetch_add(1, std::memory_order_relaxed);
      else if (ex().status >= 400) st.counters.responses_4xx.fetch_add(1, std::memory_order_relaxed);
      else if (ex().status >= 300) st.counters.responses_3xx.fetch_add(1, std::memory_order_relaxed);
      else if (ex().status >= 200) st.counters.responses_2xx.fetch_add(1, std::memory_order_relaxed);
    }
    Router::count_served(*ex().pool, ex().backend, ex().owner);  // the one spill count
  }
  if (ex().slot.held()) end_attempt(AttemptEnd::kServed);
  drop_backend(false);  // a connection with no attempt (none normally; defensive)
  log_access(outcome);
  if (worker_.on_exchange != nullptr && ex().pool != nullptr) {
    ExchangeRecord rec;
    rec.pool = ex().pool;
    rec.backend = ex().backend;
    rec.owner = ex().owner;
    rec.status = ex().status;
    rec.hops = ex().hops;
    rec.duration_us = (uv_hrtime() - ex().start_ns) / 1000;
    rec.bytes_in = bytes_from_client_;
    rec.bytes_out = bytes_to_client_;
    rec.key = ex().key;
    rec.hash = ex().hash;
    rec.keyed = ex().keyed;
    rec.reason = ex().reason;
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
  ex().backend = ex().owner = core::kNoBackend;
  arm_client_timer();
  pump_request();
}

}  // namespace rondel::proxy
