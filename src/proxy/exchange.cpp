// Exchange, attempt side: routing (Router::route), connecting or reusing a pooled connection,
// forwarding the request head and pulling the body from its BodySource, the attempt's one exit
// (counters, passive health, in-flight slot), retries, and the end of the exchange (counters,
// the owner's report). Streaming the response into the sink is exchange_response.cpp.
#include "rondel/proxy/exchange.h"

#include <algorithm>

#include "rondel/core/bitset.h"
#include "rondel/core/hash.h"
#include "rondel/net/proxy_header_writer.h"
#include "rondel/proxy/backend_conn.h"
#include "rondel/proxy/passive_health.h"
#include "rondel/proxy/router.h"

namespace rondel::proxy {

namespace {

http::Limits backend_limits() {
  http::Limits lim;
  lim.max_request_line = 8192;
  lim.max_header_bytes = 64 * 1024;
  lim.max_headers = 200;
  return lim;
}

}  // namespace

std::string_view outcome_name(Outcome o) noexcept {
  static constexpr std::string_view kNames[] = {"ok", "client_abort", "backend_error", "timeout",
                                                "rejected", "no_subset_member"};
  return kNames[static_cast<size_t>(o)];
}

Exchange::Exchange(Worker& worker) : worker_(worker), resp_parser_(backend_limits()) {
  to_backend_.req.data = this;
}

void Exchange::recycle() noexcept {
  to_backend_.clear();
  rq_ = ExchangeRequest{};
  st_ = ExchangeState{};
  attempt_ = Attempt::kNone;
  retry_after_write_ = PendingRetry::kNone;
  running_ = false;
  pool_on_written_ = false;
  // A pooled exchange keeps the capacity of the heads it rewrote; one huge head must not pin
  // its memory for ever.
  if (req_head_out_.capacity() > Worker::kMaxPooledStringCapacity) std::string().swap(req_head_out_);
}

Exchange::Start Exchange::start(const ExchangeRequest& rq) noexcept {
  rq_ = rq;
  // A new request: nothing of the previous one survives (its pool may be gone with the old
  // snapshot). No slot is held here: the previous exchange ended.
  st_ = ExchangeState{};
  st_.start_ns = uv_hrtime();
  st_.pool = rq.pool;
  attempt_ = Attempt::kNone;
  retry_after_write_ = PendingRetry::kNone;
  st_.pool->state().requests.fetch_add(1, std::memory_order_relaxed);
  const size_t words = st_.pool->excluded_words();
  if (tried_.size() < words) tried_.resize(words);  // grows once per snapshot, then reused
  std::fill(tried_.begin(), tried_.begin() + static_cast<std::ptrdiff_t>(words), 0);

  st_.subset = st_.pool->select_subset(rq.listener, head());
  if (st_.pool->config().hash_key.kind == config::HashKeyKind::kLlmPrefix) {
    running_ = true;
    worker_.exchange_started();
    start_body_key();  // routes now, or once the body has told the key
    return Start::kStarted;
  }
  const RouteKey rk = head_route_key();
  if (rk.kind == RouteKey::Kind::kReject) return Start::kNoKey;
  running_ = true;
  worker_.exchange_started();
  route_by(rk);
  return Start::kStarted;
}

RouteKey Exchange::head_route_key() const noexcept {
  const config::PoolConfig& pc = st_.pool->config();
  const uint64_t random = pc.missing_key == config::MissingKeyPolicy::kRandom
                              ? core::mix64(uv_hrtime(), reinterpret_cast<uintptr_t>(this))
                              : 0;
  return route_key(pc, head(), rq_.forward.client_ip, random);
}

void Exchange::route_by(const RouteKey& rk) noexcept {
  if (rk.kind == RouteKey::Kind::kReject) {
    fail(Failure::refused(400));  // missing_key: reject, on a key the body did not give
    return;
  }
  st_.keyed = rk.walks();
  st_.cost = request_cost(head(), body_key_.held());
  st_.key = rk.key;
  st_.hash = rk.hash;
  st_.grouped = rk.grouped;
  st_.group = rk.group;
  st_.group_key = rk.group_key;
  start_attempt();
}

// ---------------------------------------------------------------------------------------------
// Attempts

core::BackendIndex Exchange::route_attempt(bool first_pick) noexcept {
  PickRequest rq;
  rq.key = RouteKey::of(st_.keyed, st_.key, st_.hash);
  rq.key.grouped = st_.grouped;
  rq.key.group = st_.group;
  rq.key.group_key = st_.group_key;
  rq.tried = std::span<const uint64_t>(tried_.data(), st_.pool->excluded_words());
  rq.kind = first_pick ? core::PickKind::kFirst : core::PickKind::kRetry;
  rq.now_ms = worker_.now_ms();
  rq.worker = worker_.id();
  rq.subset = st_.subset;
  rq.cost = st_.cost;
  // One call: hash policy state, the bounded-load walk with backends at their connection limit
  // excluded, and the decision counters (routed, all_full, no_backend) are the Router's.
  const RouteDecision d = worker_.routing().route(
      *st_.pool, rq, worker_.scratch(st_.pool->scratch_words()), &st_.slot);
  st_.reason = static_cast<uint8_t>(d.reason);
  st_.owner = d.owner;
  st_.hops = d.hops;  // this walk passes over the backends already tried too: assign
  return d.backend;
}

void Exchange::start_attempt() noexcept {
  bool first_pick = st_.attempts == 0;  // the routing decision; retries and re-walks are not
  core::BackendIndex b = route_attempt(first_pick);
  if (b == core::kNoBackend) {
    ++st_.attempts;
    if (st_.subset != Pool::kNoSubset) {
      fail(Failure::no_subset_member());  // the subset's 503
    } else {
      fail(Failure::no_backend());
    }
    return;
  }
  begin_attempt(b, ConnSource::kIdleOrNew);
}

void Exchange::retry_same_backend() noexcept {
  // The place this request held a moment ago, taken back as it is: no pick, no bound check.
  st_.slot = take_slot(*st_.pool, st_.backend, st_.cost);
  begin_attempt(st_.backend, ConnSource::kNew);
}

void Exchange::begin_attempt(core::BackendIndex b, ConnSource source) noexcept {
  ++st_.attempts;
  attempt_ = Attempt::kConnecting;
  st_.backend = b;
  st_.req_bytes_sent = st_.resp_bytes_seen = false;
  BackendState& st = st_.pool->backend(b);
  BackendTarget target{st_.pool->backend_tls(), st_.pool->backend_host_name(b)};
  char proxy_header[net::kProxyV2MaxBytes];
  if (st_.pool->config().send_proxy_protocol == config::SendProxyProtocol::kV2) {
    sockaddr_storage local{};
    const bool known = rq_.client != nullptr && rq_.client->local_address(&local);
    const size_t n = net::write_proxy_v2(rq_.forward.client_ip, known ? &local : nullptr,
                                         proxy_header);
    target.proxy_header = std::string_view(proxy_header, n);
    target.reuse_key = core::hash64(target.proxy_header) | 1;  // never 0: that is "no header"
  }
  int err = 0;
  bool fresh = true;
  st_.conn = worker_.backend_connector().acquire(worker_, st, target, this,
                                                 source == ConnSource::kIdleOrNew, &fresh, &err);
  if (st_.conn != nullptr && !fresh) {
    backend_ready();
    return;
  }
  if (st_.conn == nullptr) {
    worker_.log().log_limited(Level::kError, worker_.now_ms(), "backend_socket_failed",
                              uv_err_name(err));
    attempt_failed(AttemptEnd::kConnectFailed, Failure::backend_error());
    return;
  }
  st_.conn->arm_timer(st_.pool->config().connect_timeout_ms);
}

void Exchange::end_attempt(AttemptEnd end) noexcept {
  if (!st_.slot.held()) return;
  // Not with a write still pending (the response came whole before the backend read all of the
  // request, and the client left while the exchange waited for that write): the write points
  // at request bytes that go with the client (an HTTP/2 stream's buffer is freed when the
  // stream is reused), and the next request on the connection would follow them. Closing the
  // connection cancels the write.
  bool reusable = end == AttemptEnd::kServed && st_.backend_reusable && st_.req_done() &&
                  st_.resp_complete() && !to_backend_.pending;
  drop_backend(reusable);
  BackendState& st = st_.pool->backend(st_.backend);
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
  st_.slot.release();
}

void Exchange::note_passive_health(BackendState& st, AttemptEnd end) noexcept {
  if (end == AttemptEnd::kStale) return;  // the backend closed an idle connection: no failure
  if (end == AttemptEnd::kServed) {
    if (!st_.resp_head_seen()) return;  // the client left before the backend answered
    if (st_.status < 500) {
      PassiveHealth::note_success(st);
      return;
    }
  }
  // A failed attempt, or a 5xx response: PassiveHealth counts it and owns the ejection.
  PassiveHealth::note_failure(*st_.pool, st_.backend, worker_.now_ms(), worker_.log());
}

void Exchange::on_backend_connected(BackendLink* conn, int status) noexcept {
  if (conn != st_.conn || !running_) return;
  if (status != 0) {
    worker_.log().log_limited(Level::kWarn, worker_.now_ms(), "backend_connect_failed",
                              "backend=" + st_.pool->backend(st_.backend).id() + " error=" +
                                  uv_err_name(status));
    attempt_failed(AttemptEnd::kConnectFailed, Failure::backend_error());
    return;
  }
  backend_ready();
}

void Exchange::backend_ready() noexcept {
  attempt_ = Attempt::kConnected;
  req_head_out_.clear();
  http::write_request_head(head(), rq_.forward, req_head_out_);
  to_backend_.push(req_head_out_.data(), req_head_out_.size());
  resp_parser_.begin(head().is_head);
  st_.conn->arm_timer(st_.pool->config().backend_io_timeout_ms);
  if (st_.req_done()) {
    // A retry of a request already read whole (no body): send the head again.
    if (flush_to_backend()) st_.conn->arm_timer(st_.pool->config().response_header_timeout_ms);
    return;
  }
  pump_body();
}

void Exchange::attempt_failed(AttemptEnd end, const Failure& f) noexcept {
  end = classify_failure(st_, head(), end, st_.conn != nullptr && st_.conn->reused());
  end_attempt(end);
  to_backend_.clear();
  attempt_ = Attempt::kNone;
  AfterFailure next = after_failure(st_, head(), end, st_.pool->config().retries);
  if (next == AfterFailure::kSameBackend) {
    // Once, on a fresh connection to the same backend: not a failure, not a spill.
    st_.stale_retried = true;
    if (to_backend_.pending) {
      retry_after_write_ = PendingRetry::kSameBackend;
      return;
    }
    retry_same_backend();
    return;
  }
  BackendState& st = st_.pool->backend(st_.backend);
  core::bit_set(std::span<uint64_t>(tried_.data(), st_.pool->excluded_words()), st_.backend);
  if (next == AfterFailure::kNextBackend) {
    worker_.stats().retries.fetch_add(1, std::memory_order_relaxed);
    st.counters.retries.fetch_add(1, std::memory_order_relaxed);
    if (to_backend_.pending) {
      retry_after_write_ = PendingRetry::kRepick;
      return;
    }
    start_attempt();
    return;
  }
  fail(f);
}

void Exchange::on_backend_timeout(BackendLink* conn) noexcept {
  if (conn != st_.conn || !running_) return;
  const bool connecting = attempt_ == Attempt::kConnecting;
  worker_.log().log_limited(Level::kWarn, worker_.now_ms(),
                            connecting ? "backend_connect_timeout" : "backend_timeout",
                            "backend=" + st_.pool->backend(st_.backend).id());
  // After the response head, the client's connection closes (fail).
  attempt_failed(connecting ? AttemptEnd::kConnectFailed : AttemptEnd::kTimedOut,
                 Failure::backend_timeout());
}

void Exchange::backend_progress() noexcept {
  if (st_.conn == nullptr || attempt_ != Attempt::kConnected) return;
  // Before the response head, once the request is sent, the response-header timeout runs.
  if (st_.resp_head_seen() || !st_.req_done()) {
    st_.conn->arm_timer(st_.pool->config().backend_io_timeout_ms);
  }
}

void Exchange::fail(const Failure& f) noexcept {
  if (!running_) return;
  const uint16_t status = f.status;
  worker_.stats().rejected[static_cast<size_t>(f.reject)].fetch_add(1, std::memory_order_relaxed);
  st_.backend_reusable = false;
  if (!st_.resp_started() && !rq_.sink->sink_busy()) {
    st_.status = status;
    st_.response = ResponseState::kLocal;
    rq_.sink->sink_local(status);
  } else if (st_.status == 0) {
    // Part of the response already went out: the owner's only honest signal left is closing.
    st_.status = status;
  }
  finish(f.outcome);
}

void Exchange::drop_backend(bool reusable) noexcept {
  cancel_splice();  // before the connection closes: the relay's registration names its fd
  if (st_.conn == nullptr) return;
  BackendLink* c = st_.conn;
  st_.conn = nullptr;
  // Pool it only while this worker holds fewer than max_idle_per_backend idle connections to
  // that backend (0 = keep none).
  if (reusable && c->clean() && c->state() != nullptr &&
      c->state()->idle_count(worker_.id()) < st_.pool->config().max_idle_per_backend) {
    c->release_to_idle(st_.pool->config().backend_idle_timeout_ms);
  } else {
    c->close();
  }
}

void Exchange::finish(Outcome outcome) noexcept {
  if (!running_) return;
  if (st_.backend != core::kNoBackend) {
    BackendState& st = st_.pool->backend(st_.backend);
    if (counts_on_backend(st_)) {
      st.counters.requests.fetch_add(1, std::memory_order_relaxed);
      if (st_.status >= 500) st.counters.responses_5xx.fetch_add(1, std::memory_order_relaxed);
      else if (st_.status >= 400) st.counters.responses_4xx.fetch_add(1, std::memory_order_relaxed);
      else if (st_.status >= 300) st.counters.responses_3xx.fetch_add(1, std::memory_order_relaxed);
      else if (st_.status >= 200) st.counters.responses_2xx.fetch_add(1, std::memory_order_relaxed);
    }
    Router::count_served(*st_.pool, st_.backend, st_.owner);  // the one spill count
  }
  if (st_.slot.held()) end_attempt(AttemptEnd::kServed);
  drop_backend(false);  // a connection with no attempt (none normally; defensive)
  body_key_.end();      // held body bytes (a body key) go with the exchange at the latest
  keying_ = false;
  running_ = false;
  attempt_ = Attempt::kNone;
  worker_.exchange_ended();
  // The one end of the request: access log and metrics, from st_.start_ns.
  record_request_end(worker_, st_, rq_.head, rq_.owner->client_side(), outcome, true);
  rq_.owner->on_exchange_done(*this, outcome);
}

// ---------------------------------------------------------------------------------------------
// The request body

void Exchange::on_body_available() noexcept {
  if (running_ && keying_) {
    pump_key();
    return;
  }
  if (running_ && attempt_ == Attempt::kConnected) pump_body();
}

void Exchange::pump_body() noexcept {
  for (;;) {
    if (!running_ || st_.conn == nullptr || st_.req_done() || to_backend_.pending) return;
    const BodyView v = rq_.body->peek();
    if (!v.bytes.empty()) {
      if (!queue_body(v.bytes)) return;
      continue;
    }
    switch (v.state) {
      case BodyState::kMore:
        // Everything offered is queued: write it out, then ask for more.
        if (!flush_to_backend()) return;
        if (try_splice_body()) return;
        if (rq_.body->want_more()) continue;
        return;
      case BodyState::kEnd:
        body_ended();
        return;
      case BodyState::kFailed: {
        // The body broke its own framing: the backend got a partial request. Abort it.
        const BodyFailure f = rq_.body->failure();
        worker_.log().log_limited(Level::kWarn, worker_.now_ms(), "request_body_rejected", f.why);
        fail(Failure::refused(f.status));
        return;
      }
    }
  }
}

bool Exchange::queue_body(std::string_view body) noexcept {
  const bool chunked = head().framing == http::Framing::kChunked;
  if (!to_backend_.room(chunked ? 3 : 1) && !flush_to_backend()) return false;
  rq_.body->consume(body.size());
  st_.body_pushed = true;
  if (chunked) {
    char* line = to_backend_.slot();
    to_backend_.push(line, http::chunk_header(body.size(), line));
    to_backend_.push(body.data(), body.size());
    to_backend_.push(http::kChunkTrailer.data(), http::kChunkTrailer.size());
  } else {
    to_backend_.push(body.data(), body.size());
  }
  return to_backend_.room(3) || flush_to_backend();
}

void Exchange::body_ended() noexcept {
  if (head().framing == http::Framing::kChunked) {
    to_backend_.push(http::kLastChunk.data(), http::kLastChunk.size());
  }
  st_.request = RequestState::kDone;
  if (!st_.resp_head_seen()) st_.conn->arm_timer(st_.pool->config().response_header_timeout_ms);
  if (!flush_to_backend()) return;
  request_written();
  if (st_.resp_complete() && !rq_.sink->sink_busy()) response_done();
}

bool Exchange::flush_to_backend() noexcept {
  if (to_backend_.pending) return false;
  if (to_backend_.n == 0) return true;
  BackendState& st = st_.pool->backend(st_.backend);
  st.counters.bytes_out.fetch_add(to_backend_.bytes, std::memory_order_relaxed);
  int r = st_.conn->write(to_backend_, &on_backend_written);
  if (r < 0) {
    to_backend_.clear();
    attempt_failed(AttemptEnd::kFailed, Failure::backend_error());
    return false;
  }
  // Only bytes the socket took count as sent: a write refused outright left the request unsent.
  if (to_backend_.sent_now > 0) {
    st_.req_bytes_sent = true;
    backend_progress();
  }
  // Pending: the body source is not asked for more (backpressure) until the write completes.
  return r == 0;
}

void Exchange::on_backend_written(uv_write_t* req, int status) noexcept {
  auto* ex = static_cast<Exchange*>(req->data);
  ex->to_backend_.pending = false;
  ex->to_backend_.clear();
  if (ex->pool_on_written_) {
    ex->worker_.give_exchange(ex);  // its owner gave it back while the write was pending
    return;
  }
  if (!ex->running_) return;
  if (ex->retry_after_write_ != PendingRetry::kNone) {
    PendingRetry retry = ex->retry_after_write_;
    ex->retry_after_write_ = PendingRetry::kNone;
    if (retry == PendingRetry::kSameBackend) ex->retry_same_backend();
    else ex->start_attempt();
    return;
  }
  if (ex->st_.conn == nullptr) return;
  if (status < 0) {
    ex->attempt_failed(AttemptEnd::kFailed, Failure::backend_error());
    return;
  }
  ex->st_.req_bytes_sent = true;
  ex->backend_progress();
  if (!ex->st_.req_done()) {
    ex->pump_body();
    return;
  }
  ex->request_written();
  if (!ex->st_.resp_head_seen()) {
    ex->st_.conn->arm_timer(ex->st_.pool->config().response_header_timeout_ms);
  }
  if (ex->st_.resp_complete() && !ex->rq_.sink->sink_busy()) ex->response_done();
}

}  // namespace rondel::proxy
