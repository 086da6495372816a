// Http1Session, connection side: accepting (the one place the transport is chosen), reading and
// parsing request heads, starting each request's Exchange, the client timeouts, writing to the
// client, closing and lingering, and what follows an exchange (keep-alive or close). The response
// sink, the body source and the access log are http1_response.cpp; the exchange itself is
// exchange.cpp and exchange_response.cpp.
//
// Flow: read -> RequestParser (head) -> Exchange::start (route, connect or reuse, forward the head
// and pull the body from this session) -> the response streams into this session's sink ->
// on_exchange_done: access log, metrics -> next (pipelined) request or close.
#include "rondel/proxy/http1_session.h"

#include <cstring>
#include <new>
#include <vector>

#include "rondel/http/writer.h"

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

}  // namespace

// ---------------------------------------------------------------------------------------------
// Life cycle

Http1Buffers::Http1Buffers(const http::Limits& lim) : limits(lim), req_parser(lim) {}

namespace {

struct Http1WorkerState final : CodecWorkerState {
  ~Http1WorkerState() override {
    for (Http1Buffers* cb : free) delete cb;
  }
  std::vector<Http1Buffers*> free;
};

Http1WorkerState* http1_state(Worker& w) noexcept {
  auto& slot = w.codec_state(static_cast<size_t>(ClientProtocol::kHttp1));
  if (slot == nullptr) slot.reset(new (std::nothrow) Http1WorkerState);
  return static_cast<Http1WorkerState*>(slot.get());
}

bool same_limits(const http::Limits& a, const http::Limits& b) noexcept {
  return a.max_request_line == b.max_request_line && a.max_header_bytes == b.max_header_bytes &&
         a.max_headers == b.max_headers && a.max_body_bytes == b.max_body_bytes;
}

}  // namespace

Http1Buffers* take_http1_buffers(Worker& w, const http::Limits& limits) noexcept {
  Http1WorkerState* state = http1_state(w);
  if (state == nullptr) return nullptr;
  // Most recently returned first; a listener with other limits looks further.
  std::vector<Http1Buffers*>& free = state->free;
  for (size_t i = free.size(); i-- > 0;) {
    Http1Buffers* cb = free[i];
    if (same_limits(cb->limits, limits)) {
      free[i] = free.back();
      free.pop_back();
      return cb;
    }
  }
  return new (std::nothrow) Http1Buffers(limits);
}

void give_http1_buffers(Worker& w, Http1Buffers* cb) noexcept {
  cb->req_parser.reset();
  cb->to_client.clear();
  if (cb->resp_head_out.capacity() > Worker::kMaxPooledStringCapacity) {
    std::string().swap(cb->resp_head_out);
  }
  Http1WorkerState* state = http1_state(w);
  if (state == nullptr) delete cb;
  else keep_or_delete(state->free, cb, Worker::kPoolReserve);
}

Http1Session::~Http1Session() {
  put_buffer();
  if (cb_ != nullptr) give_http1_buffers(worker_, cb_);
  if (ex_ != nullptr) worker_.give_exchange(ex_);  // kept until a pending backend write calls back
}

bool Http1Session::take_state() noexcept {
  if (cb_ == nullptr) {
    cb_ = take_http1_buffers(worker_, limits_of(conn_.listener()));
    if (cb_ == nullptr) return false;
  }
  if (ex_ == nullptr) ex_ = worker_.take_exchange();
  return ex_ != nullptr;
}

void Http1Session::give_state() noexcept {
  if (cb_ == nullptr || cb_->to_client.pending) return;
  give_http1_buffers(worker_, cb_);
  cb_ = nullptr;
  if (ex_ != nullptr) worker_.give_exchange(ex_);
  ex_ = nullptr;
}

void Http1Session::start() noexcept {
  set_client_reading(true);
  // The PROXY stage's time (from accept until the first request byte) is the header timeout.
  if (conn_.awaiting_proxy_header()) set_timeout(conn_.listener()->header_timeout_ms);
  else arm_client_timer();
}

void Http1Session::on_closing() noexcept {
  if (in_exchange()) ex_->abort();  // on_exchange_done's close returns at once (closing)
  reading_ = false;
}

void Http1Session::put_buffer() noexcept {
  if (buf_ == nullptr) return;
  worker_.buffers().put(buf_, buf_class_);
  buf_ = nullptr;
  buf_class_ = BufferPool::Class::kSmall;
  rpos_ = rlen_ = 0;
}

void Http1Session::grow_for_body() noexcept {
  if (buf_ == nullptr || buf_class_ == BufferPool::Class::kLarge || rlen_ != 0 ||
      transport().splice_fd() >= 0) {
    return;  // (a plain TCP client's large body is spliced; between splices it reads little)
  }
  const http::Framing framing = cb_->req_parser.head().framing;
  if (framing != http::Framing::kChunked &&
      !(framing == http::Framing::kLength && cb_->req_parser.body_left() > BufferPool::kSize)) {
    return;
  }
  worker_.buffers().put(buf_, buf_class_);
  buf_class_ = BufferPool::Class::kLarge;
  buf_ = worker_.buffers().get(buf_class_);
}

void Http1Session::linger_close() noexcept {
  if (closing() || phase_ == Phase::kLinger) return;
  phase_ = Phase::kLinger;
  // Half-close, then read and discard until the client closes (or the linger time), so the
  // response is not destroyed by a reset caused by unread request bytes.
  if (transport().shutdown() != 0) {
    close_now();
    return;
  }
  rpos_ = rlen_ = 0;
  set_client_reading(true);
  set_timeout(kLingerMs);
}

void Http1Session::drain() noexcept {
  close_after_ = true;
  if (phase_ == Phase::kIdle && rpos_ == rlen_ && head_bytes_pending() == 0) {
    close_now();
  }
}

// ---------------------------------------------------------------------------------------------
// Reading and timeouts

void Http1Session::set_client_reading(bool on, bool lazy) noexcept {
  if (closing()) return;
  want_read_ = on;
  if (on && !reading_) {
    if (transport().start_reading() == 0) reading_ = true;
  } else if (!on && reading_ && !lazy) {
    transport().stop_reading();
    reading_ = false;
  }
}

void Http1Session::arm_client_timer() noexcept {
  if (closing() || conn_.listener() == nullptr || phase_ != Phase::kIdle) return;
  bool head_started = rlen_ > rpos_ || head_bytes_pending() > 0;
  if (head_started) {
    if (head_timer_armed_) return;  // the header timeout runs from the head's first byte
    head_timer_armed_ = true;
    set_timeout(conn_.listener()->header_timeout_ms);
  } else {
    set_timeout(conn_.listener()->idle_timeout_ms);
  }
}

void Http1Session::on_alloc(uv_buf_t* buf) noexcept {
  if (buf_ == nullptr) {
    buf_ = worker_.buffers().get();
    buf_class_ = BufferPool::Class::kSmall;
    rpos_ = rlen_ = 0;
  }
  if (!want_read_) {
    // Lazily paused: append after what is held (parsed bytes may still be in a pending write).
    // A full buffer gives libuv no room: on_read then stops reading for real.
    *buf = uv_buf_init(buf_ + rlen_, static_cast<unsigned>(buf_capacity() - rlen_));
    return;
  }
  // Reading is wanted: no byte the exchange consumed is still in a pending write (BodySource).
  if (rpos_ == rlen_) {
    rpos_ = rlen_ = 0;
  } else if (rlen_ == buf_capacity() && rpos_ > 0) {
    std::memmove(buf_, buf_ + rpos_, rlen_ - rpos_);
    rlen_ -= rpos_;
    rpos_ = 0;
  }
  *buf = uv_buf_init(buf_ + rlen_, static_cast<unsigned>(buf_capacity() - rlen_));
}

void Http1Session::on_read(ssize_t nread) noexcept {
  if (nread == 0 || closing()) return;
  if (!want_read_) {
    // Bytes (a pipelined request) or EOF while an exchange runs: keep the bytes for later and
    // stop reading for real. libuv reports EOF or an error again once reading restarts.
    if (nread > 0) {
      rlen_ += static_cast<size_t>(nread);
      bytes_from_client_ += static_cast<uint64_t>(nread);
    }
    set_client_reading(false);
    return;
  }
  if (nread < 0) {
    client_eof();
    return;
  }
  if (phase_ == Phase::kLinger) {
    rpos_ = rlen_ = 0;
    return;
  }
  rlen_ += static_cast<size_t>(nread);
  bytes_from_client_ += static_cast<uint64_t>(nread);
  if (rlen_ == buf_capacity()) set_client_reading(false);
  if (phase_ == Phase::kIdle) {
    arm_client_timer();
    pump_request();
    return;
  }
  if (!body_wanted_) {
    set_client_reading(false);
    return;
  }
  // Body bytes the exchange asked for: it pulls them (peek); reading pauses lazily meanwhile.
  body_wanted_ = false;
  conn_.clear_timeout();
  set_client_reading(false, /*lazy=*/true);
  ex_->on_body_available();
}

void Http1Session::client_eof() noexcept {
  client_eof_ = true;
  set_client_reading(false);
  if (phase_ == Phase::kExchange && ex_->state().req_done()) {
    // Half-closed after a complete request: finish the response, then close.
    close_after_ = true;
    return;
  }
  close_now();
}

void Http1Session::on_timeout() noexcept {
  if (closing()) return;
  switch (phase_) {
    case Phase::kLinger:
      close_now();
      return;
    case Phase::kIdle:
      if (rlen_ > rpos_ || head_bytes_pending() > 0) {
        reject(Failure::refused(408, Reject::kClientTimeout), "header_timeout");
      } else {
        close_now();
      }
      return;
    case Phase::kExchange:
      // Armed only while the exchange waits for body bytes (want_more).
      if (!ex_->state().req_done()) {
        worker_.log().log_limited(Level::kWarn, worker_.now_ms(), "client_body_timeout");
        ex_->fail(Failure::client_body_timeout());
      }
      return;
  }
}

// ---------------------------------------------------------------------------------------------
// Request heads

void Http1Session::pump_request() noexcept {
  if (closing()) return;
  if (phase_ != Phase::kIdle) {
    set_client_reading(false);
    return;
  }
  if (rpos_ == rlen_ && cb_ == nullptr) {
    set_client_reading(true);  // idle, nothing to parse: stay without exchange state
    return;
  }
  if (!take_state()) {
    close_now();
    return;
  }
  http::Step st = cb_->req_parser.feed(buf_ != nullptr ? buf_ + rpos_ : nullptr, rlen_ - rpos_);
  rpos_ += st.consumed;
  switch (st.event) {
    case http::Event::kNeedMore:
      // Everything received so far is consumed.
      rpos_ = rlen_ = 0;
      if (cb_->req_parser.head_bytes_pending() == 0) {
        // An idle keep-alive connection holds no read buffer and no exchange state.
        put_buffer();
        give_state();
      }
      set_client_reading(true);
      return;
    case http::Event::kHead:
      on_request_head();
      return;
    case http::Event::kBody:
    case http::Event::kMessageEnd:  // not before a head
    case http::Event::kError: {
      const auto& err = cb_->req_parser.error();
      reject(Failure::refused(err.status), err.reason);
      return;
    }
  }
}

ExchangeRequest Http1Session::exchange_request() noexcept {
  ExchangeRequest rq;
  rq.head = &cb_->req_parser.head();
  rq.forward.client_ip = client_ip();
  rq.client = &transport();
  rq.forward.forwarded = conn_.listener()->forwarded_headers;
  if (conn_.tls() != nullptr) rq.forward.proto = "https";
  rq.pool = conn_.pool();
  rq.listener = conn_.listener()->name;
  rq.body = this;
  rq.sink = this;
  rq.owner = this;
  return rq;
}

void Http1Session::on_request_head() noexcept {
  conn_.refresh_snapshot();  // between requests: the newest configuration
  set_client_reading(false, /*lazy=*/true);
  conn_.clear_timeout();
  head_timer_armed_ = false;
  head_known_ = true;
  cb_->req_start_ns = uv_hrtime();
  sent_continue_ = false;
  body_wanted_ = false;
  cb_->piece = {};
  body_state_ = BodyState::kMore;
  worker_.stats().requests.fetch_add(1, std::memory_order_relaxed);
  if (conn_.listener() == nullptr || conn_.pool() == nullptr) {
    reject(Failure::no_backend(), "listener_removed");
    return;
  }
  ExchangeRequest rq = exchange_request();
  if (rq.head->framing == http::Framing::kNone) {
    // A bodiless request ends right after its head: the exchange gets the empty body.
    http::Step st = cb_->req_parser.feed(nullptr, 0);
    if (st.event == http::Event::kMessageEnd) {
      body_state_ = BodyState::kEnd;
      rq.body = &EmptyBody::instance();
    } else if (st.event == http::Event::kError) {
      body_state_ = BodyState::kFailed;
    }
  }
  phase_ = Phase::kExchange;
  if (ex_->start(rq) == Exchange::Start::kNoKey) {
    phase_ = Phase::kIdle;
    reject(Failure::refused(400), "missing_hash_key");
  }
}

void Http1Session::reject(const Failure& f, std::string_view why) noexcept {
  const uint16_t status = f.status;
  if (!take_state()) {
    close_now();
    return;
  }
  worker_.stats().rejected[static_cast<size_t>(f.reject)].fetch_add(1, std::memory_order_relaxed);
  if (worker_.log().enabled(Level::kWarn)) {
    std::string kv = "status=" + std::to_string(status) + " reason=" + std::string(why) +
                     " client=" + std::string(client_ip());
    worker_.log().log_limited(Level::kWarn, worker_.now_ms(), "request_rejected", kv);
  }
  // A request of its own for the access log: it reached no backend; before a complete head
  // there is no method or target to show.
  ExchangeState st;
  st.status = status;
  st.response = ResponseState::kLocal;
  st.start_ns = head_known_ ? cb_->req_start_ns : uv_hrtime();
  set_client_reading(false);
  sink_local(status);
  close_after_ = true;
  close_after_flush_ = true;
  // (The session object lives on until its handles' close callbacks, so logging after a failed
  // flush is safe.)
  bool head_known = head_known_;
  bool flushed = flush_to_client();
  record_request_end(worker_, st, head_known ? &cb_->req_parser.head() : nullptr, client_side(),
                     Outcome::kRejected, false);
  bytes_from_client_ = bytes_to_client_ = 0;
  if (flushed) linger_close();
}

// ---------------------------------------------------------------------------------------------
// Writing, and the end of an exchange

bool Http1Session::flush_to_client() noexcept {
  if (cb_ == nullptr) return true;
  if (cb_->to_client.pending) return false;
  size_t bytes = cb_->to_client.bytes;
  int r = transport().write(cb_->to_client);
  if (r < 0) {
    cb_->to_client.clear();
    close_now();
    return false;
  }
  bytes_to_client_ += bytes;
  return r == 0;
}

void Http1Session::on_written(int status) noexcept {
  cb_->to_client.pending = false;
  cb_->to_client.clear();
  if (closing()) return;
  if (status < 0) {
    close_now();
    return;
  }
  if (close_after_flush_) {
    linger_close();
    return;
  }
  if (in_exchange()) ex_->on_sink_drained();
}

void Http1Session::on_exchange_done(Exchange& ex, Outcome outcome) noexcept {
  const ExchangeState& st = ex.state();  // its end was recorded (client_side())
  bytes_from_client_ = bytes_to_client_ = 0;
  phase_ = Phase::kIdle;
  body_wanted_ = false;
  if (outcome != Outcome::kOk) {
    close_after_ = true;
    if (st.response != ResponseState::kLocal) {
      close_now();  // part of the response went out: closing is the only signal left
      return;
    }
    close_after_flush_ = true;  // rondel's own status, then close
    if (!closing() && flush_to_client()) linger_close();
    return;
  }
  // A response before the request body ended: the rest of the body was not read.
  if (!st.req_done()) close_after_ = true;
  if (close_after_ || client_eof_ || worker_.draining()) {
    close_after_flush_ = true;
    if (flush_to_client()) linger_close();
    return;
  }
  // Keep-alive: parse the next (possibly already pipelined) request. A large buffer the body
  // took goes back once nothing is left in it (the next read takes a small one).
  if (buf_class_ == BufferPool::Class::kLarge && rpos_ == rlen_) put_buffer();
  head_known_ = false;
  cb_->req_parser.reset();
  arm_client_timer();
  pump_request();
}

}  // namespace rondel::proxy
