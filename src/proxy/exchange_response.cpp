// ClientSession, response side: parsing the backend's response and streaming it into the
// ResponseSink (1xx, head, body, end), with the sink's backpressure pausing the backend; and the
// HTTP/1 codec's implementation of that sink (client framing, 1xx rules). The request side
// and the attempts are in exchange.cpp, the client connection in session.cpp.
#include "rondel/http/writer.h"
#include "rondel/proxy/backend_conn.h"
#include "rondel/proxy/session.h"

namespace rondel::proxy {

void ClientSession::on_backend_data(BackendConn* conn) noexcept {
  if (conn != ex().conn || closing()) return;
  ex().resp_bytes_seen = true;
  backend_progress();
  pump_response();
}

void ClientSession::on_backend_eof(BackendConn* conn, int) noexcept {
  if (conn != ex().conn || closing()) return;
  ex().backend_reusable = false;
  pump_response();
}

void ClientSession::pump_response() noexcept {
  for (;;) {
    if (closing() || ex().conn == nullptr || !in_exchange()) return;
    if (sink().sink_busy()) {
      ex().conn->pause_reading();
      return;
    }
    if (ex().resp_complete()) return;
    size_t avail = ex().conn->available();
    http::Step st = xb_->resp_parser.feed(avail > 0 ? ex().conn->data() : nullptr, avail);
    ex().conn->consume(st.consumed);
    switch (st.event) {
      case http::Event::kNeedMore:
        // Everything received so far is parsed: write it out, then read more (or end on EOF).
        if (!sink().sink_flush()) return;
        if (!ex().conn->eof()) {
          ex().conn->resume_reading();
          return;
        }
        response_eof();
        return;
      case http::Event::kHead:
        if (!response_head()) return;
        break;
      case http::Event::kBody:
        if (!sink().sink_body(st.body)) return;
        break;
      case http::Event::kMessageEnd:
        if (ex().in_interim) {
          ex().in_interim = false;
          xb_->resp_parser.begin(xb_->req_parser.head().is_head);
          break;
        }
        sink().sink_end();
        ex().response = ResponseState::kComplete;
        if (ex().conn->available() > 0) ex().backend_reusable = false;  // bytes after the response
        ex().conn->expect_no_more();
        if (sink().sink_flush()) response_done();
        return;
      case http::Event::kError:
        worker_.log().log_limited(Level::kWarn, worker_.now_ms(), "backend_bad_response",
                                  "backend=" + ex().pool->backend(ex().backend).id() + " reason=" +
                                      std::string(xb_->resp_parser.error().reason));
        ex().backend_reusable = false;
        end_attempt(AttemptEnd::kFailed);  // a malformed response is not retried
        fail_exchange(502, Reject::kBackendError, Outcome::kBackendError);
        return;
    }
  }
}

void ClientSession::response_eof() noexcept {
  if (!ex().resp_head_seen()) {
    attempt_failed(AttemptEnd::kFailed, Reject::kBackendError, 502);
    return;
  }
  http::Step fin = xb_->resp_parser.finish();
  if (fin.event != http::Event::kMessageEnd) {
    worker_.log().log_limited(Level::kWarn, worker_.now_ms(), "backend_response_truncated",
                              "backend=" + ex().pool->backend(ex().backend).id());
    attempt_failed(AttemptEnd::kFailed, Reject::kBackendError, 502);
    return;
  }
  sink().sink_end();
  ex().response = ResponseState::kComplete;
  if (sink().sink_flush()) response_done();
}

bool ClientSession::response_head() noexcept {
  const auto& rh = xb_->resp_parser.head();
  if (rh.status < 200) {
    ex().in_interim = true;
    switch (sink().sink_interim(rh)) {
      case Interim::kBusy: return false;
      case Interim::kSkipped: return true;
      case Interim::kQueued:
        ex().response = ResponseState::kInterim;  // a failure can still send a final status
        return sink().sink_flush();
    }
  }
  ex().status = rh.status;
  if (!rh.keep_alive) ex().backend_reusable = false;
  sink().sink_head(rh);
  ex().response = ResponseState::kStreaming;
  ex().conn->arm_timer(ex().pool->config().backend_io_timeout_ms);
  return true;
}

// ---------------------------------------------------------------------------------------------
// The HTTP/1 codec's response sink

ResponseSink::Interim ClientSession::sink_interim(const http::ResponseHead& rh) noexcept {
  if (rh.status == 100 && ex().sent_continue) return Interim::kSkipped;  // rondel said it
  // An HTTP/1.0 client gets no 1xx (RFC 9110 15.2).
  if (xb_->req_parser.head().version_minor == 0) return Interim::kSkipped;
  if (!flush_to_client()) return Interim::kBusy;  // the interim head string is reused
  xb_->resp_head_out.clear();
  http::write_interim_head(rh, xb_->resp_head_out);
  xb_->to_client.push(xb_->resp_head_out.data(), xb_->resp_head_out.size());
  return Interim::kQueued;
}

void ClientSession::sink_head(const http::ResponseHead& rh) noexcept {
  const auto& req = xb_->req_parser.head();
  http::ClientFraming& framing = xb_->client_framing;
  framing = http::choose_client_framing(req, rh);
  // A final response before the request body ended: the rest of the body will not be
  // forwarded, so the connection ends after this response (see response_done); say so.
  if (close_after_ || worker_.draining() || !ex().req_done()) framing.close_after = true;
  if (framing.close_after) close_after_ = true;
  xb_->resp_head_out.clear();
  http::write_response_head(req, rh, framing, xb_->resp_head_out);
  xb_->to_client.push(xb_->resp_head_out.data(), xb_->resp_head_out.size());
}

bool ClientSession::sink_body(std::string_view body) noexcept {
  return queue_body(xb_->to_client, xb_->client_framing.framing == http::Framing::kChunked, body,
                    &ClientSession::flush_to_client);
}

void ClientSession::sink_end() noexcept {
  if (xb_->client_framing.framing == http::Framing::kChunked) {
    xb_->to_client.push(http::kLastChunk.data(), http::kLastChunk.size());
  }
}

bool ClientSession::queue_body(net::OutQueue& q, bool chunked, std::string_view body,
                               bool (ClientSession::*flush)()) noexcept {
  if (chunked) {
    if (!q.room(3) && !(this->*flush)()) return false;
    char* line = q.slot();
    q.push(line, http::chunk_header(body.size(), line));
    q.push(body.data(), body.size());
    q.push(http::kChunkTrailer.data(), http::kChunkTrailer.size());
  } else {
    if (!q.room(1) && !(this->*flush)()) return false;
    q.push(body.data(), body.size());
  }
  return q.room(3) || (this->*flush)();
}

void ClientSession::response_done() noexcept {
  if (!in_exchange() || !ex().resp_complete()) return;
  if (!ex().req_done()) {
    // The backend answered before the request body ended: stop forwarding and close. Do not
    // wait for a pending body write: a backend that answers without reading the body may never
    // read it, and the write would hold the exchange until the I/O timeout. Closing the backend
    // connection (finish_exchange) cancels the write; its callback only clears the queue.
    close_after_ = true;
    ex().backend_reusable = false;
  } else if (xb_->to_backend.pending) {
    return;  // on_backend_written calls back here
  }
  finish_exchange(Outcome::kOk);
}

}  // namespace rondel::proxy
