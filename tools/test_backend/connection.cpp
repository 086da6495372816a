// Connection: request parsing, response queueing and in-order writing for one client.
#include "connection.h"

#include <algorithm>
#include <new>
#include <utility>

#include "backend.h"
#include "crc32.h"
#include "range.h"
#include "rondel/util/ascii.h"

namespace rondel::test_backend {

namespace {

constexpr size_t kHighWater = 256 * 1024;  // Output bytes serialised ahead of the socket.
constexpr size_t kMaxPending = 4096;       // Stop reading while this many responses are queued.
constexpr size_t kMaxHead = 1024 * 1024;   // /_echo shows at most this much of a head.
constexpr size_t kMaxHeaderValue = 1024;   // Longest X-Request-Id / Expect value kept.
constexpr uint64_t kLingerMs = 2000;       // Wait this long for the client's FIN after ours.
constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";

using util::iequals;

}  // namespace

const llhttp_settings_t Connection::kParserSettings = [] {
  llhttp_settings_t s;
  llhttp_settings_init(&s);
  s.on_message_begin = &Connection::on_message_begin;
  s.on_method = &Connection::on_method;
  s.on_url = &Connection::on_url;
  s.on_url_complete = &Connection::on_url_complete;
  s.on_header_field = &Connection::on_header_field;
  s.on_header_field_complete = &Connection::on_header_field_complete;
  s.on_header_value = &Connection::on_header_value;
  s.on_header_value_complete = &Connection::on_header_value_complete;
  s.on_headers_complete = &Connection::on_headers_complete;
  s.on_body = &Connection::on_body;
  s.on_message_complete = &Connection::on_message_complete;
  return s;
}();

Connection::Connection(Backend& backend) noexcept : backend_(backend) {
  llhttp_init(&parser_, HTTP_REQUEST, &kParserSettings);
  parser_.data = this;
  tcp_.data = this;
  timer_.data = this;
  write_req_.data = this;
  shutdown_req_.data = this;
}

void Connection::accept(Backend& backend, uv_stream_t* server) noexcept {
  auto* c = new (std::nothrow) Connection(backend);
  if (c == nullptr) return;
  uv_tcp_init(backend.loop(), &c->tcp_);
  uv_timer_init(backend.loop(), &c->timer_);
  c->open_handles_ = 2;
  backend.link(c);
  ++backend.stats().connections_open;
  ++backend.stats().connections_total;
  if (uv_accept(server, reinterpret_cast<uv_stream_t*>(&c->tcp_)) != 0) {
    c->close(false);
    return;
  }
  uv_tcp_nodelay(&c->tcp_, 1);
  c->update_reading();
}

void Connection::close(bool reset) noexcept {
  if (closing_) return;
  closing_ = true;
  abort_request();
  Stats& stats = backend_.stats();
  for (size_t i = front_; i < pending_.size(); ++i) {
    if (pending_[i].counted && !pending_[i].started) --stats.in_flight;
  }
  pending_.clear();
  front_ = 0;
  --stats.connections_open;
  uv_timer_stop(&timer_);
  uv_close(reinterpret_cast<uv_handle_t*>(&timer_), &Connection::on_close);
  // uv_tcp_close_reset is not allowed after uv_shutdown; fall back to an ordinary close.
  if (!reset || shutting_down_ || uv_tcp_close_reset(&tcp_, &Connection::on_close) != 0) {
    uv_close(reinterpret_cast<uv_handle_t*>(&tcp_), &Connection::on_close);
  }
}

void Connection::on_close(uv_handle_t* handle) noexcept {
  auto* c = static_cast<Connection*>(handle->data);
  if (--c->open_handles_ == 0) {
    c->backend_.unlink(c);
    delete c;
  }
}

// ---- Reading ----------------------------------------------------------------------------------

void Connection::on_alloc(uv_handle_t* handle, size_t, uv_buf_t* buf) noexcept {
  *buf = static_cast<Connection*>(handle->data)->backend_.read_buffer();
}

void Connection::on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) noexcept {
  auto* c = static_cast<Connection*>(stream->data);
  if (c->closing_) return;
  if (nread > 0) {
    if (c->shutting_down_ || c->stop_parsing_) return;  // Discard what follows the last request.
    c->feed(buf->base, static_cast<size_t>(nread));
    if (!c->closing_) c->pump();
  } else if (nread == UV_EOF) {
    c->on_eof();
  } else if (nread < 0) {
    c->close(false);
  }
}

void Connection::on_eof() noexcept {
  peer_eof_ = true;
  reading_ = false;
  if (shutting_down_) {
    close(false);
    return;
  }
  // A request cut short by the client will never complete; answer the ones that did.
  abort_request();
  stop_parsing_ = true;
  maybe_finish();
}

void Connection::update_reading() noexcept {
  if (closing_ || peer_eof_) return;
  bool want = shutting_down_ || pending_count() < kMaxPending;
  auto* stream = reinterpret_cast<uv_stream_t*>(&tcp_);
  if (want && !reading_) {
    if (uv_read_start(stream, &Connection::on_alloc, &Connection::on_read) != 0) {
      close(false);
      return;
    }
    reading_ = true;
  } else if (!want && reading_) {
    uv_read_stop(stream);
    reading_ = false;
  }
}

void Connection::save_head(const char* from, const char* to) noexcept {
  if (from == nullptr || to <= from || head_.size() >= kMaxHead) return;
  head_.append(from, std::min(static_cast<size_t>(to - from), kMaxHead - head_.size()));
}

void Connection::feed(const char* data, size_t len) noexcept {
  const char* p = data;
  const char* end = data + len;
  if (in_head_ && head_start_ != nullptr) head_start_ = p;  // The head continues in this read.
  // After a pause the parser is resumed even with no bytes left: a request without a body
  // completes in that call.
  for (;;) {
    llhttp_errno_t err = llhttp_execute(&parser_, p, static_cast<size_t>(end - p));
    if (closing_) return;
    if (err == HPE_OK) {
      if (in_head_) save_head(head_start_, end);
      return;
    }
    if (err == HPE_PAUSED_UPGRADE) {
      // Upgrade or CONNECT: the request is answered like any other, then the connection ends.
      if (pending_count() > 0) pending_.back().keep_alive = false;
      stop_parsing_ = true;
      return;
    }
    if (err != HPE_PAUSED) {
      reject(llhttp_errno_name(err));
      return;
    }
    const char* pos = llhttp_get_error_pos(&parser_);
    llhttp_resume(&parser_);
    if (head_paused_) {  // Paused by on_headers_complete, right after the head's last byte.
      head_paused_ = false;
      save_head(head_start_, pos);
      head_start_ = nullptr;
      in_head_ = false;
    }
    if (stop_parsing_) return;
    p = pos;
  }
}

void Connection::start_request() noexcept {
  in_request_ = true;
  in_head_ = true;
  head_start_ = nullptr;
  head_.clear();
  target_.clear();
  header_name_.clear();
  request_id_.clear();
  expect_.clear();
  range_.clear();
  header_kind_ = HeaderKind::kOther;
  parsed_ = RequestTarget{};
  body_bytes_ = 0;
  body_crc_ = 0;
  counted_ = false;
  checksum_ = false;
}

void Connection::abort_request() noexcept {
  if (!in_request_) return;
  in_request_ = false;
  in_head_ = false;
  if (counted_) {
    counted_ = false;
    --backend_.stats().in_flight;
    auto method = static_cast<llhttp_method_t>(llhttp_get_method(&parser_));
    backend_.ledger().append(request_id_, llhttp_method_name(method), target_, body_bytes_);
  }
}

void Connection::reject(std::string_view reason) noexcept {
  abort_request();
  stop_parsing_ = true;
  Response r;
  r.status = 400;
  r.method = "-";
  r.keep_alive = false;
  r.use_text = true;
  r.text.append("bad request: ").append(reason).append("\n");
  r.body_size = r.send_limit = r.text.size();
  r.deadline_ms = uv_now(backend_.loop());
  pending_.push_back(std::move(r));
}

void Connection::finish_request() noexcept {
  Backend& b = backend_;
  const Options& o = b.options();
  in_request_ = false;
  Response r;
  llhttp_method_t method = static_cast<llhttp_method_t>(llhttp_get_method(&parser_));
  r.method = llhttp_method_name(method);
  r.request_bytes = body_bytes_;
  r.http10 = parser_.http_major == 1 && parser_.http_minor == 0;
  r.keep_alive = llhttp_should_keep_alive(&parser_) != 0;
  r.counted = counted_;
  counted_ = false;
  uint64_t delay = 0;
  r.report_form = o.report_form;  // every response reports, /healthz too (polling)
  r.report_header = o.report_header;
  switch (parsed_.endpoint) {
    case Endpoint::kStats:
      r.text = b.stats_json();
      r.content_type = "application/json";
      break;
    case Endpoint::kReset:
      b.reset_counters();
      r.text = "reset\n";
      break;
    case Endpoint::kHealthz:
      r.status = b.healthy() ? 200 : 503;
      r.text = b.healthy() ? "ok" : "unhealthy";
      break;
    case Endpoint::kHealth:
      if (parsed_.health_fail) b.set_healthy(!*parsed_.health_fail);
      r.text = b.healthy() ? "ok" : "unhealthy";
      break;
    case Endpoint::kNormal:
    case Endpoint::kEcho:
      b.ledger().append(request_id_, r.method, target_, body_bytes_);
      if (!parsed_.error.empty()) {
        r.status = 400;
        r.text.append(parsed_.error).append("\n");
        break;
      }
      r.fail = parsed_.fail.value_or(o.fail_mode);
      r.report_raw = parsed_.load;
      r.has_crc = checksum_;
      r.request_crc = body_crc_;
      delay += parsed_.delay_ms.value_or(o.delay_ms);
      r.status = parsed_.status.value_or(r.fail == FailMode::kStatus500 ? 500 : 200);
      r.chunked = parsed_.chunked.value_or(o.chunked);
      if (parsed_.endpoint == Endpoint::kEcho) {
        r.text = head_;
      } else {
        r.use_text = false;
        r.body_size = parsed_.size.value_or(b.default_size());
        delay += serve_range(r);
      }
      break;
  }
  if (parsed_.endpoint != Endpoint::kNormal || !parsed_.error.empty()) {
    r.use_text = true;
    r.body_size = r.text.size();
  } else {
    r.use_text = false;
  }
  switch (r.fail) {
    case FailMode::kTruncateBody:
      r.chunked = false;
      r.keep_alive = false;
      break;
    case FailMode::kBadFraming:
      r.chunked = true;
      r.keep_alive = false;
      break;
    case FailMode::kCloseBeforeResponse:
      r.keep_alive = false;
      break;
    default:
      break;
  }
  if (r.http10 && r.fail != FailMode::kBadFraming) r.chunked = false;  // 1.0 has no chunking.
  r.no_body = method == HTTP_HEAD || r.status == 204 || r.status == 304;
  if (r.no_body) {
    r.send_limit = 0;
  } else {
    r.send_limit = r.fail == FailMode::kTruncateBody ? r.body_size / 2 : r.body_size;
  }
  if (r.counted) b.stats().bytes_out += r.send_limit;
  r.deadline_ms = uv_now(b.loop()) + delay;
  pending_.push_back(std::move(r));
}

uint64_t Connection::serve_range(Response& r) {
  Backend& b = backend_;
  const Options& o = b.options();
  const ByteRange range =
      r.status == 200 && !range_.empty() ? parse_range(range_, r.body_size) : ByteRange{};
  if (range.kind != RangeKind::kNone) r.object_size = r.body_size;
  if (range.kind == RangeKind::kUnsatisfiable) {
    r.status = 416;
    r.body_size = 0;
    return 0;
  }
  if (range.kind == RangeKind::kSatisfiable) {
    r.status = 206;
    r.body_offset = range.first;
    r.body_size = range.last - range.first + 1;
  }
  if (o.cache_objects == 0) return 0;
  bool hit = false;
  if (o.cache_block > 0) {
    if (r.body_size == 0) return 0;
    hit = lookup_blocks(b.cache(), target_, r.body_offset, r.body_offset + r.body_size - 1,
                        o.cache_block, b.stats().hits, b.stats().misses);
  } else {
    hit = b.cache().lookup(target_);
    ++(hit ? b.stats().hits : b.stats().misses);
  }
  r.cache = hit ? CacheResult::kHit : CacheResult::kMiss;
  return hit ? 0 : o.miss_delay_ms;
}

// ---- llhttp callbacks -------------------------------------------------------------------------

int Connection::on_message_begin(llhttp_t* p) noexcept {
  static_cast<Connection*>(p->data)->start_request();
  return 0;
}

int Connection::on_method(llhttp_t* p, const char* at, size_t) noexcept {
  auto* c = static_cast<Connection*>(p->data);
  if (c->head_start_ == nullptr) c->head_start_ = at;
  return 0;
}

int Connection::on_url(llhttp_t* p, const char* at, size_t len) noexcept {
  static_cast<Connection*>(p->data)->target_.append(at, len);
  return 0;
}

int Connection::on_url_complete(llhttp_t* p) noexcept {
  auto* c = static_cast<Connection*>(p->data);
  c->parsed_ = parse_request_target(c->target_);
  c->checksum_ = c->parsed_.checksum.value_or(c->backend_.options().checksum);
  return 0;
}

int Connection::on_header_field(llhttp_t* p, const char* at, size_t len) noexcept {
  auto* c = static_cast<Connection*>(p->data);
  // Only short names matter (X-Request-Id, Expect); a long name is kept cut, and never matches.
  constexpr size_t kKeep = 32;
  if (c->header_name_.size() < kKeep) {
    c->header_name_.append(at, std::min(len, kKeep - c->header_name_.size()));
  }
  return 0;
}

int Connection::on_header_field_complete(llhttp_t* p) noexcept {
  auto* c = static_cast<Connection*>(p->data);
  if (iequals(c->header_name_, "x-request-id")) {
    c->header_kind_ = HeaderKind::kRequestId;
  } else if (iequals(c->header_name_, "expect")) {
    c->header_kind_ = HeaderKind::kExpect;
  } else if (iequals(c->header_name_, "range")) {
    c->header_kind_ = HeaderKind::kRange;
  } else {
    c->header_kind_ = HeaderKind::kOther;
  }
  c->header_name_.clear();
  return 0;
}

int Connection::on_header_value(llhttp_t* p, const char* at, size_t len) noexcept {
  auto* c = static_cast<Connection*>(p->data);
  std::string* value = c->header_kind_ == HeaderKind::kRequestId ? &c->request_id_
                       : c->header_kind_ == HeaderKind::kExpect  ? &c->expect_
                       : c->header_kind_ == HeaderKind::kRange   ? &c->range_
                                                                 : nullptr;
  if (value != nullptr && value->size() < kMaxHeaderValue) {
    value->append(at, std::min(len, kMaxHeaderValue - value->size()));
  }
  return 0;
}

int Connection::on_header_value_complete(llhttp_t* p) noexcept {
  static_cast<Connection*>(p->data)->header_kind_ = HeaderKind::kOther;
  return 0;
}

int Connection::on_headers_complete(llhttp_t* p) noexcept {
  auto* c = static_cast<Connection*>(p->data);
  Stats& stats = c->backend_.stats();
  c->head_paused_ = true;  // feed() saves the head up to where the parser stopped.
  if (!is_control(c->parsed_.endpoint)) {
    c->counted_ = true;
    ++stats.requests;
    stats.max_in_flight = std::max(stats.max_in_flight, ++stats.in_flight);
    FailMode fail = c->parsed_.fail.value_or(c->backend_.options().fail_mode);
    if (fail == FailMode::kResetAfterRequest && c->parsed_.error.empty()) {
      c->close(true);  // Ledgers the request (0 body bytes) and frees its in_flight slot.
      return HPE_PAUSED;
    }
  }
  // Only the oldest outstanding request may be answered 100 Continue without reordering.
  if (c->pending_count() == 0 && iequals(c->expect_, "100-continue")) {
    c->fill_.append(kContinue);
    c->flush();
  }
  return HPE_PAUSED;
}

int Connection::on_body(llhttp_t* p, const char* at, size_t len) noexcept {
  auto* c = static_cast<Connection*>(p->data);
  c->body_bytes_ += len;
  if (c->counted_) c->backend_.stats().bytes_in += len;
  if (c->checksum_) c->body_crc_ = crc32_update(c->body_crc_, at, len);
  return 0;
}

int Connection::on_message_complete(llhttp_t* p) noexcept {
  auto* c = static_cast<Connection*>(p->data);
  c->finish_request();
  if (!c->pending_[c->pending_.size() - 1].keep_alive) {
    c->stop_parsing_ = true;  // Whatever follows a closing request is not read.
    return HPE_PAUSED;
  }
  return 0;
}

// ---- Writing ----------------------------------------------------------------------------------

void Connection::pop_response() noexcept {
  ++front_;
  if (front_ == pending_.size()) {
    pending_.clear();
    front_ = 0;
  } else if (front_ >= 64 && front_ * 2 >= pending_.size()) {
    pending_.erase(pending_.begin(), pending_.begin() + static_cast<ptrdiff_t>(front_));
    front_ = 0;
  }
}

void Connection::pump() noexcept {
  if (closing_ || finishing_) return;
  // When the socket took everything without a write request, no write callback will come back
  // here, so go on serialising (a large body) at once.
  bool again = true;
  while (again) {
    bool full = serialise();
    flush();
    again = full && !closing_ && !finishing_ && !writing_ && fill_.empty();
  }
  update_reading();
  maybe_finish();
}

bool Connection::serialise() noexcept {
  Stats& stats = backend_.stats();
  uint64_t now = uv_now(backend_.loop());
  while (front_ < pending_.size() && fill_.size() < kHighWater) {
    Response& r = pending_[front_];
    if (!r.started) {
      if (r.fail == FailMode::kHang) break;  // Never answered; later requests wait behind it.
      if (r.deadline_ms > now) {
        uv_timer_start(&timer_, &Connection::on_timer, r.deadline_ms - now, 0);
        break;
      }
      r.started = true;
      if (r.counted) --stats.in_flight;
      r.report_in_flight = stats.in_flight;  // the requests still held, this one excluded
      if (r.fail == FailMode::kCloseBeforeResponse) {
        pop_response();
        finishing_ = true;
        break;
      }
      append_head(fill_, r, backend_.fixed_headers());
    }
    if (!append_body(fill_, r, backend_.pattern(), backend_.pattern_period(), kHighWater)) break;
    if (r.chunked && !r.no_body && r.fail != FailMode::kTruncateBody) append_last_chunk(fill_);
    if (r.fail == FailMode::kExtraBytes) fill_.append(kGarbage);
    bool keep_alive = r.keep_alive;
    pop_response();
    if (!keep_alive) {
      finishing_ = true;
      break;
    }
  }
  return fill_.size() >= kHighWater;
}

void Connection::flush() noexcept {
  if (writing_ || closing_ || fill_.empty()) return;
  auto* stream = reinterpret_cast<uv_stream_t*>(&tcp_);
  // Most responses fit the socket buffer: write them now, without a write request.
  uv_buf_t buf = uv_buf_init(fill_.data(), static_cast<unsigned>(fill_.size()));
  int n = uv_try_write(stream, &buf, 1);
  if (n == static_cast<int>(fill_.size())) {
    fill_.clear();
    return;
  }
  if (n < 0 && n != UV_EAGAIN) {
    close(false);
    return;
  }
  size_t written = n > 0 ? static_cast<size_t>(n) : 0;
  out_.swap(fill_);  // fill_ takes out_'s empty buffer and keeps filling.
  buf = uv_buf_init(out_.data() + written, static_cast<unsigned>(out_.size() - written));
  if (uv_write(&write_req_, stream, &buf, 1, &Connection::on_write) != 0) {
    close(false);
    return;
  }
  writing_ = true;
}

void Connection::on_write(uv_write_t* req, int status) noexcept {
  auto* c = static_cast<Connection*>(req->data);
  c->writing_ = false;
  c->out_.clear();
  if (status < 0) {
    c->close(false);  // No-op when the write was cancelled by close().
    return;
  }
  if (c->finishing_) {
    c->flush();
    c->maybe_finish();
  } else {
    c->pump();
  }
}

void Connection::on_timer(uv_timer_t* timer) noexcept {
  static_cast<Connection*>(timer->data)->pump();
}

void Connection::maybe_finish() noexcept {
  if (closing_ || writing_ || !fill_.empty()) return;
  if (finishing_) {
    begin_shutdown();
    return;
  }
  if (!peer_eof_) return;
  if (pending_count() == 0 || pending_[front_].fail == FailMode::kHang) close(false);
}

void Connection::begin_shutdown() noexcept {
  if (shutting_down_ || closing_) return;
  if (peer_eof_) {
    close(false);
    return;
  }
  shutting_down_ = true;
  stop_parsing_ = true;
  // Half-close and wait for the client's FIN, so unread input cannot turn our FIN into an RST
  // that would destroy the response in flight.
  if (uv_shutdown(&shutdown_req_, reinterpret_cast<uv_stream_t*>(&tcp_), &Connection::on_shutdown) !=
      0) {
    close(false);
    return;
  }
  uv_timer_start(&timer_, &Connection::on_linger, kLingerMs, 0);
  update_reading();
}

void Connection::on_shutdown(uv_shutdown_t* req, int status) noexcept {
  auto* c = static_cast<Connection*>(req->data);
  if (status < 0) c->close(false);
}

void Connection::on_linger(uv_timer_t* timer) noexcept {
  static_cast<Connection*>(timer->data)->close(false);
}

}  // namespace rondel::test_backend
