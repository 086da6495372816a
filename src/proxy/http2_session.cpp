// Http2Session, connection side: accepting, the nghttp2 server session and its settings and
// flood limits, reading frames into it, writing what it sends, the connection timeout, GOAWAY
// on drain, closing. The streams (head, body source, response sink) are http2_stream.cpp.
#include "rondel/proxy/http2_session.h"

#include <algorithm>
#include <cstring>
#include <new>


namespace rondel::proxy {

namespace {

void count(std::atomic<uint64_t>& c) noexcept { c.fetch_add(1, std::memory_order_relaxed); }

}  // namespace

// The nghttp2 callbacks: each finds its session (user_data) and stream (stream user data).
struct Http2Callbacks {
  static Http2Stream* stream(nghttp2_session* ng, int32_t id) noexcept {
    return static_cast<Http2Stream*>(nghttp2_session_get_stream_user_data(ng, id));
  }

  static int on_begin_headers(nghttp2_session* ng, const nghttp2_frame* f, void* ud) noexcept {
    auto* s = static_cast<Http2Session*>(ud);
    if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
    Http2Stream* st = s->state_->take_stream(*s, f->hd.stream_id);
    if (st == nullptr) return NGHTTP2_ERR_CALLBACK_FAILURE;
    s->streams_.push_back(st);
    nghttp2_session_set_stream_user_data(ng, f->hd.stream_id, st);
    count(s->worker_.stats().h2_streams);
    return 0;
  }

  static int on_header(nghttp2_session* ng, const nghttp2_frame* f, const uint8_t* name,
                       size_t namelen, const uint8_t* value, size_t valuelen, uint8_t,
                       void* ud) noexcept {
    auto* s = static_cast<Http2Session*>(ud);
    Http2Stream* st = stream(ng, f->hd.stream_id);
    if (st == nullptr) return 0;
    std::string_view n(reinterpret_cast<const char*>(name), namelen);
    std::string_view v(reinterpret_cast<const char*>(value), valuelen);
    const uint64_t limit = s->listener()->h2_max_header_list_size;
    // Trailers (a HEADERS frame after the head) are dropped, their size counted in the limit.
    bool ok = f->headers.cat == NGHTTP2_HCAT_REQUEST ? st->add_header(n, v, limit)
                                                     : st->add_trailer(n, v, limit);
    if (!ok) {
      count(s->worker_.stats().h2_floods[kH2FloodHeaderList]);
      // Refuse the stream (RST_STREAM); the connection goes on.
      return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    return 0;
  }

  static int on_frame_recv(nghttp2_session* ng, const nghttp2_frame* f, void* ud) noexcept {
    auto* s = static_cast<Http2Session*>(ud);
    if (f->hd.type == NGHTTP2_RST_STREAM) {
      count(s->worker_.stats().h2_resets_received[std::min<uint32_t>(f->rst_stream.error_code, 13)]);
      if (!s->take_reset_token()) {
        // Rapid reset (CVE-2023-44487): more resets than the listener allows.
        nghttp2_session_terminate_session(ng, NGHTTP2_ENHANCE_YOUR_CALM);
        return 0;
      }
    }
    Http2Stream* st = stream(ng, f->hd.stream_id);
    if (st == nullptr) return 0;
    bool end = (f->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
    if (f->hd.type == NGHTTP2_HEADERS && f->headers.cat == NGHTTP2_HCAT_REQUEST) {
      if (const http::RuleVerdict v = st->finish_head(end)) {
        st->refuse(v);  // never reaches a backend (RFC 9113 8.1.1: a response, then reset)
        return 0;
      }
      st->start();
    } else if ((f->hd.type == NGHTTP2_DATA || f->hd.type == NGHTTP2_HEADERS) && end) {
      // The last DATA frame, or a trailer section: the request body ends.
      st->on_end_stream();
    }
    return 0;
  }

  static int on_data_chunk(nghttp2_session* ng, uint8_t, int32_t id, const uint8_t* data,
                           size_t len, void*) noexcept {
    // The connection window reopens at once (the per-stream window bounds the memory); the
    // stream's own reopens as the exchange consumes.
    nghttp2_session_consume_connection(ng, len);
    Http2Stream* st = stream(ng, id);
    if (st != nullptr) st->on_data(data, len);
    return 0;
  }

  static int on_begin_frame(nghttp2_session* ng, const nghttp2_frame_hd* hd, void* ud) noexcept {
    auto* s = static_cast<Http2Session*>(ud);
    if (hd->type == NGHTTP2_PRIORITY && hd->stream_id == 0) {
      // RFC 9113 6.3: a connection error. With SETTINGS_NO_RFC7540_PRIORITIES sent, nghttp2
      // skips PRIORITY frames unread, this check included.
      nghttp2_session_terminate_session(ng, NGHTTP2_PROTOCOL_ERROR);
      return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    if (hd->type != NGHTTP2_HEADERS || hd->stream_id <= 0) return 0;
    if (nghttp2_session_find_stream(ng, hd->stream_id) != nullptr) return 0;  // open: nghttp2's
    if (const uint32_t code = s->headers_on_old_stream(hd->stream_id)) {
      nghttp2_session_terminate_session(ng, code);
      return NGHTTP2_ERR_CALLBACK_FAILURE;  // nothing more is read; the GOAWAY is flushed
    }
    return 0;
  }

  static int on_stream_close(nghttp2_session* ng, int32_t id, uint32_t code, void* ud) noexcept {
    auto* s = static_cast<Http2Session*>(ud);
    if (s->closed_.find(id) == Http2Session::ClosedStreams::Seen::kNo) s->closed_.add(id, false);
    Http2Stream* st = stream(ng, id);
    if (st == nullptr) return 0;
    nghttp2_session_set_stream_user_data(ng, id, nullptr);
    if (st->on_close(code)) s->stream_gone(st);
    return 0;
  }

  static int on_frame_send(nghttp2_session* ng, const nghttp2_frame* f, void* ud) noexcept {
    auto* s = static_cast<Http2Session*>(ud);
    if ((f->hd.type == NGHTTP2_DATA || f->hd.type == NGHTTP2_HEADERS) &&
        (f->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0) {
      if (Http2Stream* st = stream(ng, f->hd.stream_id)) st->on_response_sent();
    }
    if (f->hd.type == NGHTTP2_RST_STREAM) {
      s->closed_.add(f->hd.stream_id, true);
      count(s->worker_.stats().h2_resets_sent[std::min<uint32_t>(f->rst_stream.error_code, 13)]);
    }
    if (f->hd.type == NGHTTP2_GOAWAY) {
      count(s->worker_.stats().h2_goaways_sent);
      if (f->goaway.error_code == NGHTTP2_ENHANCE_YOUR_CALM) {
        count(s->worker_.stats().h2_floods[kH2FloodCalm]);
      }
    }
    return 0;
  }

  static ssize_t read_data(nghttp2_session* ng, int32_t id, uint8_t*, size_t len,
                           uint32_t* flags, nghttp2_data_source*, void*) noexcept {
    Http2Stream* st = stream(ng, id);
    if (st == nullptr) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    return st->read_response(len, flags);
  }

  static int send_data(nghttp2_session* ng, nghttp2_frame* f, const uint8_t* framehd,
                       size_t length, nghttp2_data_source*, void*) noexcept {
    Http2Stream* st = stream(ng, f->hd.stream_id);
    // No padding is ever chosen (no select_padding callback), so the frame is header + payload.
    if (st == nullptr || f->data.padlen != 0) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    return st->send_response(framehd, length);
  }
};

nghttp2_data_provider h2_data_provider() noexcept {
  nghttp2_data_provider p{};
  p.read_callback = &Http2Callbacks::read_data;
  return p;
}

// ---------------------------------------------------------------------------------------------
// Life cycle

Http2Session::Http2Session(ClientConnection& conn) noexcept
    : conn_(conn), worker_(conn.worker()), transport_(conn.transport()) {
  count(worker_.stats().h2_connections);
}

Http2WorkerState::~Http2WorkerState() {
  for (Http2Stream* st : free_streams) delete st;
}

Http2WorkerState* Http2WorkerState::of(Worker& w) noexcept {
  auto& slot = w.codec_state(static_cast<size_t>(ClientProtocol::kHttp2));
  if (slot == nullptr) slot.reset(new (std::nothrow) Http2WorkerState);
  return static_cast<Http2WorkerState*>(slot.get());
}

Http2Stream* Http2WorkerState::take_stream(Http2Session& s, int32_t id) noexcept {
  if (free_streams.empty()) return new (std::nothrow) Http2Stream(s, id);
  Http2Stream* st = free_streams.back();
  free_streams.pop_back();
  st->reuse(s, id);
  return st;
}

void Http2WorkerState::give_stream(Http2Stream* st) noexcept {
  st->reuse(st->session(), 0);  // gives its exchange back now, trims its buffers
  keep_or_delete(free_streams, st, Worker::kPoolReserve);
}

Http2Session::~Http2Session() {
  if (ng_ != nullptr) nghttp2_session_del(ng_);
  if (buf_ != nullptr) worker_.buffers().put(buf_);
}

void Http2Session::start() noexcept {
  state_ = Http2WorkerState::of(worker_);
  if (state_ == nullptr || !init_session()) {
    close_now();
    return;
  }
  transport_.start_reading();
  if (conn_.awaiting_proxy_header()) {
    // The server preface waits for the PROXY header: the first read (on_read, which the
    // transport calls only once the header is whole) flushes it. header_timeout bounds it.
    conn_.set_timeout(listener()->header_timeout_ms);
    return;
  }
  arm_timer();
  flush();
}

bool Http2Session::init_session() noexcept {
  nghttp2_session_callbacks* cbs = nullptr;
  if (nghttp2_session_callbacks_new(&cbs) != 0) return false;
  nghttp2_session_callbacks_set_on_begin_frame_callback(cbs, &Http2Callbacks::on_begin_frame);
  nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, &Http2Callbacks::on_begin_headers);
  nghttp2_session_callbacks_set_on_header_callback(cbs, &Http2Callbacks::on_header);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, &Http2Callbacks::on_frame_recv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, &Http2Callbacks::on_data_chunk);
  nghttp2_session_callbacks_set_on_stream_close_callback(cbs, &Http2Callbacks::on_stream_close);
  nghttp2_session_callbacks_set_on_frame_send_callback(cbs, &Http2Callbacks::on_frame_send);
  nghttp2_session_callbacks_set_send_data_callback(cbs, &Http2Callbacks::send_data);
  nghttp2_option* opt = nullptr;
  if (nghttp2_option_new(&opt) != 0) {
    nghttp2_session_callbacks_del(cbs);
    return false;
  }
  const config::ListenerConfig& l = *listener();
  nghttp2_option_set_no_auto_window_update(opt, 1);
  nghttp2_option_set_max_deflate_dynamic_table_size(opt, 4096);
  // Flood defences (Debian's 1.52.0-1+deb12u3 carries the CVE-2023-44487 and CVE-2024-28182
  // fixes: the reset rate limit and the CONTINUATION count).
  // rondel's own bucket (take_reset_token) answers ENHANCE_YOUR_CALM first; nghttp2's, twice as
  // large, is the backstop.
  nghttp2_option_set_stream_reset_rate_limit(opt, uint64_t{l.h2_max_resets_per_second} * 20,
                                             uint64_t{l.h2_max_resets_per_second} * 2);
  reset_tokens_ = static_cast<double>(l.h2_max_resets_per_second) * 10;
  reset_refill_ms_ = worker_.now_ms();
  nghttp2_option_set_max_continuations(opt, 8);
  nghttp2_option_set_max_outbound_ack(opt, 1000);
  nghttp2_option_set_max_settings(opt, 32);
  nghttp2_option_set_no_closed_streams(opt, 1);
  int rv = nghttp2_session_server_new3(&ng_, cbs, this, opt, state_->mem.mem());
  nghttp2_option_del(opt);
  nghttp2_session_callbacks_del(cbs);
  if (rv != 0) return false;
  nghttp2_settings_entry iv[] = {
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, l.h2_max_concurrent_streams},
      {NGHTTP2_SETTINGS_HEADER_TABLE_SIZE, static_cast<uint32_t>(l.h2_hpack_table_size)},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, static_cast<uint32_t>(l.h2_max_header_list_size)},
      {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
      {NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES, 1},
  };
  return nghttp2_submit_settings(ng_, NGHTTP2_FLAG_NONE, iv, std::size(iv)) == 0;
}

void Http2Session::ClosedStreams::add(int32_t id, bool by_us) noexcept {
  ids[next] = id;
  reset_by_us[next] = by_us;
  next = static_cast<uint8_t>((next + 1) % ids.size());
}

Http2Session::ClosedStreams::Seen Http2Session::ClosedStreams::find(int32_t id) const noexcept {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] == id) return reset_by_us[i] ? Seen::kResetByUs : Seen::kClosed;
  }
  return Seen::kNo;
}

uint32_t Http2Session::headers_on_old_stream(int32_t id) const noexcept {
  // A stream id above the last one opened opens a stream (nghttp2 checks the rest); an even one
  // is nghttp2's PROTOCOL_ERROR already.
  if ((id & 1) == 0 || id > nghttp2_session_get_last_proc_stream_id(ng_)) return 0;
  switch (closed_.find(id)) {
    case ClosedStreams::Seen::kResetByUs: return 0;  // nghttp2 ignores it
    case ClosedStreams::Seen::kClosed: return NGHTTP2_STREAM_CLOSED;
    case ClosedStreams::Seen::kNo: break;
  }
  return NGHTTP2_PROTOCOL_ERROR;
}

bool Http2Session::take_reset_token() noexcept {
  const double rate = listener()->h2_max_resets_per_second;
  uint64_t now = worker_.now_ms();
  reset_tokens_ = std::min(rate * 10, reset_tokens_ + rate * static_cast<double>(now - reset_refill_ms_) / 1000.0);
  reset_refill_ms_ = now;
  if (reset_tokens_ < 1) return false;
  reset_tokens_ -= 1;
  return true;
}

void Http2Session::on_closing() noexcept {
  closing_ = true;
  // Every stream still running ends as a client abort.
  std::vector<Http2Stream*> streams;
  streams.swap(streams_);
  for (Http2Stream* st : streams) {
    if (ng_ != nullptr) nghttp2_session_set_stream_user_data(ng_, st->id(), nullptr);
    if (st->exchange_running()) st->abort_exchange();
    state_->give_stream(st);
  }
  count(worker_.stats().h2_connections_closed);
  if (flush_queued_) {
    flush_queued_ = false;
    worker_.cancel_flush(this);
  }
}

void Http2Session::stream_gone(Http2Stream* st) noexcept {
  auto it = std::find(streams_.begin(), streams_.end(), st);
  if (it != streams_.end()) {
    *it = streams_.back();
    streams_.pop_back();
  }
  state_->give_stream(st);
}

void Http2Session::drain() noexcept {
  if (closing_ || goaway_sent_ || ng_ == nullptr) return;
  goaway_sent_ = true;
  nghttp2_submit_goaway(ng_, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(ng_),
                        NGHTTP2_NO_ERROR, nullptr, 0);
  flush();
}

// ---------------------------------------------------------------------------------------------
// Reading, writing, the timeout

void Http2Session::arm_timer() noexcept {
  const config::ListenerConfig* l = listener();
  if (closing_ || l == nullptr) return;
  // No stream: the idle timeout; streams open: the client must show life within the body
  // timeout (a zero-window stall, a stream that never ends its body).
  conn_.set_timeout(streams_.empty() ? l->idle_timeout_ms : l->body_timeout_ms);
}

void Http2Session::on_timeout() noexcept {
  if (closing_) return;
  bool client_stalled = streams_.empty();
  for (Http2Stream* st : streams_) client_stalled = client_stalled || st->client_stalled();
  if (!client_stalled) {
    // The exchanges wait for their backends (whose own timeouts apply), not for the client.
    arm_timer();
    return;
  }
  count(worker_.stats().h2_floods[kH2FloodTimeout]);
  if (ng_ != nullptr) {
    nghttp2_session_terminate_session(ng_, NGHTTP2_NO_ERROR);
    flush_now();  // the GOAWAY, as far as the socket takes it now
  }
  close_now();
}

void Http2Session::on_alloc(uv_buf_t* buf) noexcept {
  if (buf_ == nullptr) buf_ = worker_.buffers().get();
  *buf = uv_buf_init(buf_, static_cast<unsigned>(BufferPool::kSize));
}

void Http2Session::on_read(ssize_t nread) noexcept {
  if (closing_ || nread == 0) return;
  if (nread < 0) {
    close_now();
    return;
  }
  in_recv_ = true;
  ssize_t rv = nghttp2_session_mem_recv(ng_, reinterpret_cast<const uint8_t*>(buf_),
                                        static_cast<size_t>(nread));
  in_recv_ = false;
  if (closing_) return;
  if (rv < 0) {
    if (rv == NGHTTP2_ERR_FLOODED || rv == NGHTTP2_ERR_TOO_MANY_CONTINUATIONS) {
      count(worker_.stats().h2_floods[kH2FloodFrames]);
    }
    if (rv != NGHTTP2_ERR_FLOODED) {
      nghttp2_session_terminate_session(ng_, NGHTTP2_PROTOCOL_ERROR);
      flush_now();  // the GOAWAY, as far as the socket takes it now
    }
    close_now();
    return;
  }
  if (streams_.empty() && buf_ != nullptr) {
    worker_.buffers().put(buf_);
    buf_ = nullptr;
  }
  arm_timer();
  flush();
}

void Http2Session::flush() noexcept {
  // While flushing, flush_now's own loop picks up what the streams queue (want_write).
  if (closing_ || flush_queued_ || flushing_ || ng_ == nullptr) return;
  flush_queued_ = true;
  worker_.want_flush(this);
}

void Http2Session::flush_now() noexcept {
  if (closing_ || in_recv_ || flushing_ || out_q_.pending || ng_ == nullptr) return;
  flushing_ = true;  // calls back into flush() from the streams return at once
  while (!closing_) {
    // Frames are gathered into out_, except large DATA frames on TLS, which put_data_frame
    // (send_data) writes at once after what out_ held before them. When such a write is left
    // pending, out_ keeps the frames nghttp2 gave after it for the next round.
    round_bytes_ = 0;
    while (!out_q_.pending && out_.size() + round_bytes_ < kOutChunk) {
      const uint8_t* data = nullptr;
      ssize_t n = nghttp2_session_mem_send(ng_, &data);
      if (n < 0) {
        flushing_ = false;
        close_now();
        return;
      }
      if (n == 0) break;
      out_.append(reinterpret_cast<const char*>(data), static_cast<size_t>(n));
    }
    if (!out_q_.pending && !out_.empty()) {
      out_q_.clear();
      out_q_.push(out_.data(), out_.size());
      int r = transport_.write(out_q_);
      if (r < 0) {
        flushing_ = false;
        close_now();
        return;
      }
      // A pending write on a plain socket still points into out_ (on_transport_written clears).
      if (r == 0 || transport_.consumes_on_write()) out_.clear();
    }
    if (out_q_.pending) break;  // on_transport_written continues
    // The output is free again: the streams whose sink stopped move on (and may queue more).
    // From the back: a stream whose exchange ends here leaves streams_ by swap-remove, which
    // moves the last stream into its slot; going forward, that stream would be skipped and, if
    // its sink waits for this call (a lent piece sent), never resumed.
    for (size_t i = streams_.size(); i-- > 0 && !closing_;) {
      if (i < streams_.size()) streams_[i]->on_output_drained();
    }
    if (closing_ || nghttp2_session_want_write(ng_) == 0) break;
  }
  flushing_ = false;
  if (!closing_ && !out_q_.pending && out_.empty() && nghttp2_session_want_read(ng_) == 0 &&
      nghttp2_session_want_write(ng_) == 0) {
    close_now();  // GOAWAY exchanged and every stream done
  }
}

bool Http2Session::put_data_frame(const char* frame, size_t len) noexcept {
  // Below this a payload is copied with the frames around it: writing it alone would make a
  // TLS record and a socket write per small response (measured: small responses cost 40% more).
  constexpr size_t kDirectMin = 4096;
  if (!transport_.consumes_on_write() || len < kDirectMin) {
    out_.append(frame, len);  // h2c: the one copy (the write may be pending for a while)
    return true;
  }
  round_bytes_ += len;
  out_q_.clear();
  if (!out_.empty()) out_q_.push(out_.data(), out_.size());  // the frames before it, in order
  out_q_.push(frame, len);
  int r = transport_.write(out_q_);  // encrypted before it returns; 1: pending, out_q_ says so
  out_.clear();
  return r >= 0;
}

void Http2Session::on_written(int status) noexcept {
  out_q_.pending = false;
  out_q_.clear();
  if (!transport_.consumes_on_write()) out_.clear();  // what the pending write pointed at
  if (closing_) return;
  if (status < 0) {
    close_now();
    return;
  }
  flush();
}

}  // namespace rondel::proxy
