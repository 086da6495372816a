// Http1Session, the codec's side of its exchange: the ResponseSink (HTTP/1 client framing, the
// 1xx rules, the keep-alive decision, rondel's own statuses), the BodySource (the de-chunked
// request body from the read buffer, Expect: 100-continue) and the access-log line.
#include <cstdio>

#include "rondel/http/writer.h"
#include "rondel/net/splice_pipe.h"
#include "rondel/proxy/http1_session.h"

namespace rondel::proxy {

namespace {

constexpr std::string_view k100Continue = "HTTP/1.1 100 Continue\r\n\r\n";

}  // namespace

// ---------------------------------------------------------------------------------------------
// The response sink

ResponseSink::Interim Http1Session::sink_interim(const http::ResponseHead& rh) noexcept {
  if (rh.status == 100 && sent_continue_) return Interim::kSkipped;  // rondel said it
  // An HTTP/1.0 client gets no 1xx (RFC 9110 15.2).
  if (cb_->req_parser.head().version_minor == 0) return Interim::kSkipped;
  if (!flush_to_client()) return Interim::kBusy;  // the interim head string is reused
  cb_->resp_head_out.clear();
  http::write_interim_head(rh, cb_->resp_head_out);
  cb_->to_client.push(cb_->resp_head_out.data(), cb_->resp_head_out.size());
  return Interim::kQueued;
}

void Http1Session::sink_head(const http::ResponseHead& rh) noexcept {
  const auto& req = cb_->req_parser.head();
  http::ClientFraming& framing = cb_->client_framing;
  framing = http::choose_client_framing(req, rh);
  // A final response before the request body ended: the rest of the body will not be
  // forwarded, so the connection ends after this response (on_exchange_done); say so.
  if (close_after_ || worker_.draining() || !ex_->state().req_done()) framing.close_after = true;
  if (framing.close_after) close_after_ = true;
  cb_->resp_head_out.clear();
  http::write_response_head(req, rh, framing, cb_->resp_head_out);
  cb_->to_client.push(cb_->resp_head_out.data(), cb_->resp_head_out.size());
}

bool Http1Session::sink_body(std::string_view body) noexcept { return queue_client_body(body); }

bool Http1Session::sink_splices(http::Framing framing) const noexcept {
  return cb_ != nullptr && !closing() && cb_->client_framing.framing == framing &&
         (framing == http::Framing::kLength || framing == http::Framing::kChunked) &&
         transport().splice_fd() >= 0;
}

int Http1Session::sink_splice_fd(http::Framing framing) noexcept {
  if (cb_ == nullptr || cb_->to_client.pending || cb_->to_client.n > 0 || !sink_splices(framing)) {
    return -1;
  }
  return transport().splice_fd();
}

void Http1Session::sink_end() noexcept {
  if (cb_->client_framing.framing == http::Framing::kChunked) {
    cb_->to_client.push(http::kLastChunk.data(), http::kLastChunk.size());
  }
}

void Http1Session::sink_local(uint16_t status) noexcept {
  cb_->to_client.clear();
  std::string_view resp = http::canned_response(status);
  cb_->to_client.push(resp.data(), resp.size());
}

bool Http1Session::queue_client_body(std::string_view body) noexcept {
  net::OutQueue& q = cb_->to_client;
  if (cb_->client_framing.framing == http::Framing::kChunked) {
    if (!q.room(3) && !flush_to_client()) return false;
    char* line = q.slot();
    q.push(line, http::chunk_header(body.size(), line));
    q.push(body.data(), body.size());
    q.push(http::kChunkTrailer.data(), http::kChunkTrailer.size());
  } else {
    if (!q.room(1) && !flush_to_client()) return false;
    q.push(body.data(), body.size());
  }
  return q.room(3) || flush_to_client();
}

// ---------------------------------------------------------------------------------------------
// The body source

BodyView Http1Session::peek() noexcept {
  if (!cb_->piece.empty() || body_state_ != BodyState::kMore) {
    return BodyView{cb_->piece, body_state_};
  }
  http::Step st = cb_->req_parser.feed(buf_ != nullptr ? buf_ + rpos_ : nullptr, rlen_ - rpos_);
  rpos_ += st.consumed;
  switch (st.event) {
    case http::Event::kBody:
      cb_->piece = st.body;
      break;
    case http::Event::kMessageEnd:
      // The request is whole: pipelined bytes wait for the next one (reading pauses lazily).
      body_state_ = BodyState::kEnd;
      set_client_reading(false, /*lazy=*/true);
      conn_.clear_timeout();
      break;
    case http::Event::kError:
      body_state_ = BodyState::kFailed;
      break;
    case http::Event::kNeedMore:  // everything received is parsed
    case http::Event::kHead:      // not inside a body
      break;
  }
  return BodyView{cb_->piece, body_state_};
}

bool Http1Session::want_more() noexcept {
  if (closing()) return false;
  send_continue();
  if (closing()) return false;
  if (rpos_ < rlen_) return true;  // bytes arrived while reading was lazily paused
  rpos_ = rlen_ = 0;               // every consumed byte is written: the buffer is free again
  grow_for_body();
  body_wanted_ = true;
  set_client_reading(true);
  set_timeout(conn_.listener()->body_timeout_ms);  // the client's stall, from now
  return false;
}

int Http1Session::body_splice_fd(uint64_t min, uint64_t* bytes) noexcept {
  if (cb_ == nullptr || closing() || body_state_ != BodyState::kMore || !cb_->piece.empty() ||
      rpos_ != rlen_) {
    return -1;
  }
  const http::Framing framing = cb_->req_parser.head().framing;
  if (framing != http::Framing::kLength && framing != http::Framing::kChunked) return -1;
  const uint64_t left = cb_->req_parser.body_left();
  const int fd = transport().splice_fd();
  if (left < min || fd < 0) return -1;
  send_continue();  // the client may wait for it before it sends the body
  if (closing()) return -1;
  set_client_reading(false);  // for real: the relay reads the socket from here
  body_wanted_ = false;
  set_timeout(conn_.listener()->body_timeout_ms);
  *bytes = left;
  return fd;
}

void Http1Session::body_spliced(uint64_t n) noexcept {
  cb_->req_parser.skip_body(n);
  bytes_from_client_ += n;
  set_timeout(conn_.listener()->body_timeout_ms);  // every spliced byte: the client is not stalled
}

BodySource::SpliceChunk Http1Session::body_splice_next_chunk(uint64_t min) noexcept {
  using Kind = SpliceChunk::Kind;
  const int fd = cb_ != nullptr && !closing() ? transport().splice_fd() : -1;
  char line[kChunkLinePeek];
  // Each pass reads at least one byte of a line; the parser bounds a line's length, this bounds
  // the passes (a longer line is left to the copy path).
  for (int pass = 0; pass < kChunkLinePasses && fd >= 0; ++pass) {
    const net::LinePart got = net::recv_line_part(fd, line, sizeof line);
    if (got.kind == net::LinePart::Kind::kWait) return {Kind::kWait, 0};
    if (got.kind == net::LinePart::Kind::kEnd) break;  // a read sees it again
    bytes_from_client_ += got.n;
    set_timeout(conn_.listener()->body_timeout_ms);  // the client sent something
    const http::Step st = cb_->req_parser.feed(line, got.n);
    if (st.event == http::Event::kError) {
      body_state_ = BodyState::kFailed;  // peek() says so; nothing of the line went on
      break;
    }
    if (st.event != http::Event::kNeedMore || cb_->req_parser.last_chunk_seen()) break;
    const uint64_t left = cb_->req_parser.body_left();
    if (left == 0) continue;  // the CRLF after the data, or part of a line: read on
    if (left < min) break;    // a small chunk: the copy path moves it
    return {Kind::kData, left};
  }
  return {Kind::kCopy, 0};
}

void Http1Session::body_splice_wait(SpliceWait on) noexcept {
  if (on == SpliceWait::kClient) set_timeout(conn_.listener()->body_timeout_ms);
  else conn_.clear_timeout();  // backpressure from the backend: not the client's stall
}

BodyFailure Http1Session::failure() const noexcept {
  const http::ParseError& err = cb_->req_parser.error();
  return BodyFailure{err.status, err.reason};
}

void Http1Session::send_continue() noexcept {
  const auto& head = cb_->req_parser.head();
  if (sent_continue_ || !head.expect_continue || head.framing == http::Framing::kNone ||
      head.version_minor < 1 || cb_->to_client.pending) {
    return;
  }
  sent_continue_ = true;
  cb_->to_client.push(k100Continue.data(), k100Continue.size());
  flush_to_client();
}

// ---------------------------------------------------------------------------------------------
// The end records' client side

ClientSide Http1Session::client_side() noexcept {
  ClientSide c;
  c.client = client_ip();
  c.bytes_in = bytes_from_client_;
  c.bytes_out = bytes_to_client_;
  c.tls = conn_.tls();
  c.listener_pool = conn_.pool();
  return c;
}

}  // namespace rondel::proxy
