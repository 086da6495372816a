// Http2Stream: one HTTP/2 request stream. Builds the request head an HTTP/1 request for the same
// URL gives (so the same backend is chosen), is the Exchange's BodySource (DATA frames, the
// stream window given back as the exchange consumes) and its ResponseSink (HEADERS, then DATA
// through a deferred data provider), and writes the access-log line.
#include <algorithm>
#include <cstring>

#include "rondel/http/request_rules.h"
#include "rondel/http/writer.h"
#include "rondel/proxy/http2_session.h"

namespace rondel::proxy {

nghttp2_data_provider h2_data_provider() noexcept;

namespace {

constexpr size_t kRespBufLimit = 64 * 1024;  // response bytes queued per stream before it stalls
// A DATA frame's header, written into resp_ just before the frame's payload, so header and
// payload leave as one piece (send_response).
constexpr size_t kFrameHead = 9;
// The payload of one DATA frame at most: with its header, one full TLS record (16,384 bytes of
// plaintext), so no frame needs a second record for its last bytes.
constexpr size_t kDataMax = kBodyPieceGrain;
static_assert(kDataMax + kFrameHead == 16384);
static_assert(kFrameHead <= kBodyHeadroom);
// Body pieces from this size on are lent (sent from the backend buffer); smaller ones are copied
// into resp_, as a frame of theirs is copied with the frames around it anyway (put_data_frame).
constexpr size_t kLendMin = 4096;

bool idempotent_method(std::string_view m) {
  return m == "GET" || m == "HEAD" || m == "OPTIONS" || m == "TRACE" || m == "PUT" ||
         m == "DELETE";
}

// Fields that HTTP/2 forbids (RFC 9113 8.2.2), never sent to the client.
bool connection_specific(std::string_view name) {
  return http::iequals(name, "connection") || http::iequals(name, "keep-alive") ||
         http::iequals(name, "proxy-connection") || http::iequals(name, "transfer-encoding") ||
         http::iequals(name, "upgrade");
}

nghttp2_nv make_nv(std::string_view n, std::string_view v) {
  return nghttp2_nv{reinterpret_cast<uint8_t*>(const_cast<char*>(n.data())),
                    reinterpret_cast<uint8_t*>(const_cast<char*>(v.data())), n.size(), v.size(),
                    NGHTTP2_NV_FLAG_NONE};
}

}  // namespace

Http2Stream::~Http2Stream() {
  if (ex_ != nullptr) s_->worker().give_exchange(ex_);
}

namespace {

// Empties `s`, keeping its memory unless it grew past what a pooled object keeps.
void trim(std::string& s) noexcept {
  s.clear();
  if (s.capacity() > Worker::kMaxPooledStringCapacity) std::string().swap(s);
}

template <typename T>
void trim(std::vector<T>& v, size_t keep) noexcept {
  v.clear();
  if (v.capacity() > keep) std::vector<T>().swap(v);
}

}  // namespace

void Http2Stream::reuse(Http2Session& s, int32_t id) noexcept {
  if (ex_ != nullptr) s_->worker().give_exchange(ex_);
  ex_ = nullptr;
  s_ = &s;
  id_ = id;
  trim(hbuf_);
  trim(body_);
  trim(resp_);
  trim(names_);
  trim(hoff_, 3 * 64);
  trim(headers_, 64);
  trim(nv_, 64);
  head_ = http::RequestHead{};
  header_bytes_ = 0;
  body_off_ = body_unacked_ = resp_off_ = lent_len_ = 0;
  resp_left_ = kLeftUnknown;
  lent_ = nullptr;
  start_ns_ = bytes_in_ = bytes_out_ = 0;
  req_end_ = body_wanted_ = resp_submitted_ = resp_end_ = deferred_ = closed_ = gone_ = false;
  stalled_ = false;
}

// ---------------------------------------------------------------------------------------------
// The request head

bool Http2Stream::add_header(std::string_view name, std::string_view value, uint64_t limit) {
  header_bytes_ += name.size() + value.size() + 32;  // RFC 9113 6.5.2's accounting
  if (header_bytes_ > limit) return false;
  if (http::iequals(name, "cookie") && !hoff_.empty()) {
    // Split cookie fields are joined for HTTP/1 (RFC 9113 8.2.3), so a cookie key sees one.
    for (size_t i = 0; i < hoff_.size(); i += 3) {
      std::string_view n(hbuf_.data() + hoff_[i], hoff_[i + 1]);
      if (n == "cookie" && i + 3 == hoff_.size()) {
        hbuf_.append("; ").append(value);
        hoff_[i + 2] += static_cast<uint32_t>(value.size() + 2);
        return true;
      }
    }
  }
  hoff_.push_back(static_cast<uint32_t>(hbuf_.size()));
  hoff_.push_back(static_cast<uint32_t>(name.size()));
  hoff_.push_back(static_cast<uint32_t>(value.size()));
  hbuf_.append(name).append(value);
  return true;
}

http::RuleVerdict Http2Stream::finish_head(bool end_stream) {
  headers_.clear();
  std::string_view authority;
  bool has_authority = false;
  head_ = http::RequestHead{};
  for (size_t i = 0; i < hoff_.size(); i += 3) {
    std::string_view n(hbuf_.data() + hoff_[i], hoff_[i + 1]);
    std::string_view v(hbuf_.data() + hoff_[i] + hoff_[i + 1], hoff_[i + 2]);
    if (!n.empty() && n[0] == ':') {
      if (n == ":method") head_.method = v;
      else if (n == ":path") head_.target = v;
      else if (n == ":authority") authority = v, has_authority = true;
      continue;
    }
    if (n == "content-length") {
      const std::optional<uint64_t> len = http::parse_content_length(v);
      if (!len || head_.framing == http::Framing::kLength) return {400, "bad_content_length"};
      head_.framing = http::Framing::kLength;
      head_.content_length = *len;
    }
    headers_.push_back(http::Header{n, v, false});
  }
  if (head_.method.empty()) return {400, "bad_method"};
  // The rules an HTTP/1 request for the same URL goes through (rondel/http/request_rules.h).
  if (auto v = http::check_target(head_.method, head_.target, http::TargetForms::kHttp2)) return v;
  // RFC 9113 8.3.1: Host is made from :authority when the request has no host field.
  if (has_authority && std::none_of(headers_.begin(), headers_.end(), [](const http::Header& h) {
        return h.name == "host";
      })) {
    headers_.insert(headers_.begin(), http::Header{"host", authority, false});
  }
  if (auto v = http::resolve_authority(head_, headers_, authority, has_authority)) return v;
  s_->worker().hop_by_hop_marker().mark(headers_);  // te: trailers, trailer, Connection-named
  head_.headers = headers_;
  head_.is_head = head_.method == "HEAD";
  head_.idempotent = idempotent_method(head_.method);
  head_.keep_alive = true;
  if (end_stream) {
    head_.framing = http::Framing::kNone;
    req_end_ = true;
  } else if (head_.framing != http::Framing::kLength) {
    head_.framing = http::Framing::kChunked;  // a body of unknown length: chunked to the backend
  }
  return {};
}

void Http2Stream::refuse(const http::RuleVerdict& v) noexcept {
  Worker& w = s_->worker();
  start_ns_ = uv_hrtime();
  w.stats().requests.fetch_add(1, std::memory_order_relaxed);
  const Failure f = Failure::refused(v.status);
  w.stats().rejected[static_cast<size_t>(f.reject)].fetch_add(1, std::memory_order_relaxed);
  if (w.log().enabled(Level::kWarn)) {
    std::string kv = "status=" + std::to_string(v.status) + " reason=" + std::string(v.reason) +
                     " client=" + std::string(s_->client_ip()) + " stream=" + std::to_string(id_);
    w.log().log_limited(Level::kWarn, w.now_ms(), "request_rejected", kv);
  }
  sink_local(v.status);
  ExchangeState st;
  st.status = v.status;
  st.response = ResponseState::kLocal;
  st.start_ns = start_ns_;
  record_request_end(w, st, &head_, client_side(), Outcome::kRejected, false);
}

void Http2Stream::start() noexcept {
  Worker& w = s_->worker();
  start_ns_ = uv_hrtime();
  w.stats().requests.fetch_add(1, std::memory_order_relaxed);
  if (s_->pool() == nullptr || (ex_ = w.take_exchange()) == nullptr) {
    sink_local(503);
    return;
  }
  ExchangeRequest rq;
  rq.head = &head_;
  rq.forward.client_ip = s_->client_ip();
  rq.forward.forwarded = s_->listener()->forwarded_headers;
  if (s_->tls() != nullptr) rq.forward.proto = "https";
  rq.pool = s_->pool();
  rq.listener = s_->listener()->name;
  rq.client = s_->transport();
  rq.body = head_.framing == http::Framing::kNone ? static_cast<BodySource*>(&EmptyBody::instance())
                                                  : this;
  rq.sink = this;
  rq.owner = this;
  if (ex_->start(rq) == Exchange::Start::kNoKey) {
    w.give_exchange(ex_);
    ex_ = nullptr;
    const Failure f = Failure::refused(400);
    w.stats().rejected[static_cast<size_t>(f.reject)].fetch_add(1, std::memory_order_relaxed);
    sink_local(f.status);
  }
}

// ---------------------------------------------------------------------------------------------
// The body source

void Http2Stream::on_data(const uint8_t* data, size_t len) noexcept {
  bytes_in_ += len;
  body_.append(reinterpret_cast<const char*>(data), len);
  if (body_wanted_ && ex_ != nullptr) {
    body_wanted_ = false;
    ex_->on_body_available();
  }
}

void Http2Stream::on_end_stream() noexcept {
  req_end_ = true;
  if (body_wanted_ && ex_ != nullptr) {
    body_wanted_ = false;
    ex_->on_body_available();
  }
}

void Http2Stream::on_response_sent() noexcept {
  if (req_end_ || gone_) return;
  nghttp2_submit_rst_stream(s_->ng(), NGHTTP2_FLAG_NONE, id_, NGHTTP2_NO_ERROR);
}

BodyView Http2Stream::peek() noexcept {
  // Bytes offered here stay where they are until want_more() (BodySource's contract): the
  // exchange's write to the backend points at them, and DATA arriving meanwhile must not move
  // them. So a body still arriving gets room for the stream's whole window before any of it is
  // offered: the client can send no more than the window until want_more() gives the consumed
  // bytes back, and appending never reallocates.
  if (body_off_ == 0 && !req_end_ && !body_.empty()) {
    const int32_t window = nghttp2_session_get_stream_effective_local_window_size(s_->ng(), id_);
    if (window > 0 && body_.capacity() < static_cast<size_t>(window)) {
      body_.reserve(static_cast<size_t>(window));
    }
  }
  std::string_view v(body_.data() + body_off_, body_.size() - body_off_);
  return BodyView{v, req_end_ ? BodyState::kEnd : BodyState::kMore};
}

void Http2Stream::consume(size_t n) noexcept {
  body_off_ += n;
  body_unacked_ += n;
}

bool Http2Stream::want_more() noexcept {
  // Every consumed byte is written to the backend: free it and reopen the stream's window.
  body_.erase(0, body_off_);
  body_off_ = 0;
  if (body_unacked_ > 0) {
    nghttp2_session_consume_stream(s_->ng(), id_, body_unacked_);
    body_unacked_ = 0;
    s_->flush();
  }
  if (!body_.empty() || req_end_) return true;
  body_wanted_ = true;
  return false;
}

// ---------------------------------------------------------------------------------------------
// The response sink

void Http2Stream::submit(uint16_t status, bool with_body) noexcept {
  // nv_[0] is the :status slot; the caller put the other fields after it.
  // Three digits by hand: snprintf was 0.8% of rondel's CPU on small HTTP/2 responses (perf).
  const unsigned code = status % 1000u;
  code_[0] = static_cast<char>('0' + code / 100);
  code_[1] = static_cast<char>('0' + code / 10 % 10);
  code_[2] = static_cast<char>('0' + code % 10);
  nv_[0] = make_nv(":status", std::string_view(code_, 3));
  nghttp2_data_provider dp = h2_data_provider();
  nghttp2_submit_response(s_->ng(), id_, nv_.data(), nv_.size(), with_body ? &dp : nullptr);
  resp_submitted_ = true;
  s_->flush();
}

void Http2Stream::sink_head(const http::ResponseHead& rh) noexcept {
  // Names go lowercase (RFC 9113 8.2.1) into names_ (sized first: the views stay valid);
  // nghttp2 copies them when submitting. Both buffers are the stream's own, reused.
  size_t total = 0;
  for (const auto& h : rh.headers) total += h.name.size();
  names_.resize(total);
  char* out = names_.data();
  nv_.resize(1);
  for (const auto& h : rh.headers) {
    if (h.hop_by_hop || connection_specific(h.name)) continue;
    char* name = out;
    for (char c : h.name) *out++ = static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
    nv_.push_back(make_nv(std::string_view(name, h.name.size()), h.value));
  }
  bool body = !head_.is_head && rh.status != 204 && rh.status != 304;
  // A Content-Length body ends with its last byte: the frame carrying it then has END_STREAM,
  // even when that piece was lent and the exchange sees the end only after it is sent.
  resp_left_ = body && rh.framing == http::Framing::kLength ? rh.content_length : kLeftUnknown;
  submit(rh.status, body);
  if (!body || resp_left_ == 0) resp_end_ = true;
}

bool Http2Stream::sink_body(std::string_view body) noexcept {
  bytes_out_ += body.size();
  if (resp_left_ != kLeftUnknown) {
    resp_left_ -= std::min<uint64_t>(resp_left_, body.size());
    if (resp_left_ == 0) resp_end_ = true;
  }
  if (body.size() >= kLendMin) {
    // Kept where the backend connection read it (ResponseSink's contract): the DATA frames take
    // their payload from there, and the stream reports busy until all of it is sent, so the
    // exchange reads the backend again only then.
    lent_ = body.data();
    lent_len_ = body.size();
  } else {
    // resp_ keeps kFrameHead bytes before resp_off_ that may be overwritten: headroom at
    // first, then bytes already sent.
    if (resp_off_ == resp_.size()) {
      resp_.resize(kFrameHead);
      resp_off_ = kFrameHead;
    } else if (resp_off_ > kRespBufLimit) {
      resp_.erase(0, resp_off_ - kFrameHead);  // the sent prefix, so resp_ stays bounded
      resp_off_ = kFrameHead;
    }
    resp_.append(body);
  }
  if (deferred_) {
    deferred_ = false;
    nghttp2_session_resume_data(s_->ng(), id_);
  }
  s_->flush();
  return !sink_busy();
}

void Http2Stream::sink_end() noexcept {
  resp_end_ = true;
  if (deferred_) {
    deferred_ = false;
    nghttp2_session_resume_data(s_->ng(), id_);
  }
}

void Http2Stream::sink_local(uint16_t status) noexcept {
  std::string_view canned = http::canned_response(status);
  (void)canned;
  static constexpr std::string_view kZero = "0";
  nv_.resize(1);
  nv_.push_back(make_nv("content-length", kZero));
  resp_end_ = true;
  submit(status, false);
}

bool Http2Stream::sink_flush() noexcept {
  s_->flush();
  return !sink_busy();
}

bool Http2Stream::sink_busy() const noexcept {
  bool busy = lent_len_ > 0 || resp_.size() - resp_off_ >= kRespBufLimit;
  if (busy) stalled_ = true;
  return busy;
}

ssize_t Http2Stream::read_response(size_t len, uint32_t* flags) noexcept {
  // The bytes stay in place (NO_COPY) until nghttp2 sends the frame (send_response): first what
  // resp_ queued, then the lent piece, which came after it.
  const size_t queued = resp_.size() - resp_off_;
  const size_t n = std::min({len, queued > 0 ? queued : lent_len_, kDataMax});
  *flags |= NGHTTP2_DATA_FLAG_NO_COPY;
  const bool last = queued > 0 ? n == queued && lent_len_ == 0 : n == lent_len_;
  if (last && resp_end_) {
    *flags |= NGHTTP2_DATA_FLAG_EOF;
    return static_cast<ssize_t>(n);
  }
  if (n == 0) {
    deferred_ = true;
    return NGHTTP2_ERR_DEFERRED;
  }
  return static_cast<ssize_t>(n);
}

int Http2Stream::send_response(const uint8_t* framehd, size_t length) noexcept {
  if (!s_->data_room()) return NGHTTP2_ERR_WOULDBLOCK;
  if (length == 0) {  // the END_STREAM frame of a body that ended empty: no payload
    char head[kFrameHead];
    std::memcpy(head, framehd, kFrameHead);
    return s_->put_data_frame(head, kFrameHead) ? 0 : NGHTTP2_ERR_CALLBACK_FAILURE;
  }
  // The header goes in the kFrameHead bytes before the payload (resp_'s headroom or payload
  // already sent; before a lent piece, the backend buffer's kBodyHeadroom or bytes consumed or
  // sent), and the session takes both before this returns (put_data_frame copies or encrypts).
  char* frame;
  if (resp_off_ < resp_.size()) {
    frame = resp_.data() + resp_off_ - kFrameHead;
    resp_off_ += length;
  } else {
    if (lent_len_ < length) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;  // the exchange ended
    frame = const_cast<char*>(lent_) - kFrameHead;
    lent_ += length;
    lent_len_ -= length;
    if (lent_len_ == 0) lent_ = nullptr;
  }
  std::memcpy(frame, framehd, kFrameHead);
  return s_->put_data_frame(frame, kFrameHead + length) ? 0 : NGHTTP2_ERR_CALLBACK_FAILURE;
}

void Http2Stream::on_output_drained() noexcept {
  if (!stalled_ || ex_ == nullptr || !ex_->running()) return;
  if (lent_len_ > 0 || resp_.size() - resp_off_ >= kRespBufLimit / 2) return;
  stalled_ = false;
  ex_->on_sink_drained();
}

// ---------------------------------------------------------------------------------------------
// The end of the exchange, of the stream

void Http2Stream::on_exchange_done(Exchange& ex, Outcome outcome) noexcept {
  // A piece still lent (the exchange failed or was aborted with it unsent) is the backend
  // buffer's, which goes with the exchange: nothing more is sent from it.
  lent_ = nullptr;
  lent_len_ = 0;
  const ExchangeState& st = ex.state();  // its end was recorded (client_side())
  Worker& w = s_->worker();
  if (outcome != Outcome::kOk && st.response != ResponseState::kLocal && resp_submitted_ &&
      !closed_ && !gone_) {
    // Part of the response went out: resetting the stream is the only signal left.
    nghttp2_submit_rst_stream(s_->ng(), NGHTTP2_FLAG_NONE, id_, NGHTTP2_INTERNAL_ERROR);
  }
  w.give_exchange(ex_);
  ex_ = nullptr;
  if (closed_) {
    s_->stream_gone(this);  // deletes this stream
    return;
  }
  s_->flush();
}

bool Http2Stream::on_close(uint32_t) noexcept {
  if (exchange_running() && resp_end_ && resp_off_ == resp_.size() && lent_len_ == 0) {
    // The whole response went out as the exchange ends (its flush sent the last frame): it
    // finishes on its own and its end frees the stream.
    closed_ = true;
    return false;
  }
  gone_ = true;  // the caller frees the stream
  if (exchange_running()) ex_->abort();  // on_exchange_done gives the exchange back
  return true;
}

ClientSide Http2Stream::client_side() noexcept {
  ClientSide c;
  c.client = s_->client_ip();
  c.bytes_in = bytes_in_;
  c.bytes_out = bytes_out_;
  c.proto = "h2";
  c.stream = static_cast<uint64_t>(id_);
  c.tls = s_->tls();
  c.listener_pool = s_->pool();
  return c;
}

}  // namespace rondel::proxy
