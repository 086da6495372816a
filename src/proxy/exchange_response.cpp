// Exchange, response side: parsing the backend's response and streaming it into the
// ResponseSink (1xx, head, body, end), with the sink's backpressure pausing the backend. The
// client framing of it is the codec's (the sink's); the attempts are in exchange.cpp.
#include "rondel/proxy/backend_conn.h"
#include "rondel/proxy/exchange.h"

namespace rondel::proxy {

void Exchange::on_backend_data(BackendConn* conn) noexcept {
  if (conn != st_.conn || !running_) return;
  st_.resp_bytes_seen = true;
  backend_progress();
  pump_response();
}

void Exchange::on_backend_eof(BackendConn* conn, int) noexcept {
  if (conn != st_.conn || !running_) return;
  st_.backend_reusable = false;
  pump_response();
}

void Exchange::on_sink_drained() noexcept {
  if (!running_) return;
  if (st_.resp_complete()) {
    // Bytes after the response: this connection is not reusable.
    if (st_.conn != nullptr && st_.conn->available() > 0) st_.backend_reusable = false;
    response_done();
    return;
  }
  if (st_.conn != nullptr && attempt_ == Attempt::kConnected) {
    backend_progress();  // the response moves: the backend I/O timeout starts again
    pump_response();
  }
}

void Exchange::sink_stalled() noexcept {
  if (running_ && st_.conn != nullptr) st_.conn->hold_reading();
}

bool Exchange::flush_sink() noexcept {
  if (rq_.sink->sink_flush()) return true;
  sink_stalled();
  return false;
}

void Exchange::pump_response() noexcept {
  for (;;) {
    if (!running_ || st_.conn == nullptr || relay_ != nullptr) return;  // a relay has the body
    if (rq_.sink->sink_busy()) {
      st_.conn->hold_reading();
      return;
    }
    if (st_.resp_complete()) return;
    size_t avail = st_.conn->available();
    http::Step st = resp_parser_.feed(avail > 0 ? st_.conn->data() : nullptr, avail);
    st_.conn->consume(st.consumed);
    switch (st.event) {
      case http::Event::kNeedMore:
        // Everything received so far is parsed: write it out, then read more (or end on EOF).
        if (!flush_sink()) return;
        if (!st_.conn->eof()) {
          if (try_splice()) return;
          st_.conn->resume_reading();
          return;
        }
        response_eof();
        return;
      case http::Event::kHead:
        if (!response_head()) return;
        break;
      case http::Event::kBody:
        if (!rq_.sink->sink_body(st.body)) {
          sink_stalled();
          return;
        }
        break;
      case http::Event::kMessageEnd:
        if (st_.in_interim) {
          st_.in_interim = false;
          resp_parser_.begin(head().is_head);
          break;
        }
        rq_.sink->sink_end();
        st_.response = ResponseState::kComplete;
        if (st_.conn->available() > 0) st_.backend_reusable = false;  // bytes after the response
        st_.conn->expect_no_more();
        if (flush_sink()) response_done();
        return;
      case http::Event::kError:
        worker_.log().log_limited(Level::kWarn, worker_.now_ms(), "backend_bad_response",
                                  "backend=" + st_.pool->backend(st_.backend).id() + " reason=" +
                                      std::string(resp_parser_.error().reason));
        st_.backend_reusable = false;
        end_attempt(AttemptEnd::kFailed);  // a malformed response is not retried
        fail(Failure::backend_error());
        return;
    }
  }
}

void Exchange::response_eof() noexcept {
  if (!st_.resp_head_seen()) {
    attempt_failed(AttemptEnd::kFailed, Failure::backend_error());
    return;
  }
  http::Step fin = resp_parser_.finish();
  if (fin.event != http::Event::kMessageEnd) {
    worker_.log().log_limited(Level::kWarn, worker_.now_ms(), "backend_response_truncated",
                              "backend=" + st_.pool->backend(st_.backend).id());
    attempt_failed(AttemptEnd::kFailed, Failure::backend_error());
    return;
  }
  rq_.sink->sink_end();
  st_.response = ResponseState::kComplete;
  if (flush_sink()) response_done();
}

bool Exchange::response_head() noexcept {
  const auto& rh = resp_parser_.head();
  if (rh.status < 200) {
    st_.in_interim = true;
    switch (rq_.sink->sink_interim(rh)) {
      case ResponseSink::Interim::kBusy: return false;
      case ResponseSink::Interim::kSkipped: return true;
      case ResponseSink::Interim::kQueued:
        st_.response = ResponseState::kInterim;  // a failure can still send a final status
        return flush_sink();
    }
  }
  st_.status = rh.status;
  if (const auto& lr = st_.pool->config().load_report; lr.enabled) {
    report_from(lr, rh, worker_.now_ms(), st_.pool->backend(st_.backend).report);
  }
  if (!rh.keep_alive) st_.backend_reusable = false;
  // The sink reads state(): the response is streaming and the request perhaps not done.
  st_.response = ResponseState::kStreaming;
  rq_.sink->sink_head(rh);
  // An HTTP/2 sink writes the head at once; when that write finds the client connection gone,
  // the session closes and ends every exchange on it, this one too (recycled: no pool, no
  // backend connection).
  if (!running_) return false;
  // A body larger than a small buffer that cannot be spliced streams through a large one: a
  // quarter of the reads, parser calls and sink writes per byte. A body that can be spliced
  // keeps the small one: between splices it reads only what a handback needs.
  const bool large = rh.framing == http::Framing::kChunked ||
                     rh.framing == http::Framing::kUntilClose ||
                     (rh.framing == http::Framing::kLength && rh.content_length > BufferPool::kSize);
  if (large && (st_.conn->fd() < 0 || !rq_.sink->sink_splices(rh.framing))) {
    st_.conn->set_read_class(BufferPool::Class::kLarge);
  }
  st_.conn->arm_timer(st_.pool->config().backend_io_timeout_ms);
  return true;
}

void Exchange::response_done() noexcept {
  if (!running_ || !st_.resp_complete()) return;
  if (!st_.req_done()) {
    // The backend answered before the request body ended: stop forwarding (the owner closes the
    // client connection: state().req_done() is false). Do not wait for a pending body write: a
    // backend that answers without reading the body may never read it, and the write would hold
    // the exchange until the I/O timeout. Closing the backend connection (finish) cancels the
    // write; its callback only clears the queue.
    st_.backend_reusable = false;
  } else if (to_backend_.pending) {
    return;  // on_backend_written calls back here
  }
  finish(Outcome::kOk);
}

}  // namespace rondel::proxy
