// Exchange, spliced response bodies: the rest of a Content-Length body, or the data of a chunked
// body's chunks, goes from the backend socket to the client socket through a pooled pipe
// (net::SpliceRelay) and never enters user space; the parser is advanced over it afterwards.
//
// Chunked to chunked: the relay moves one chunk's data at a time. When a chunk's data is done,
// the next chunk-size line is read from the backend socket here, only up to its end (MSG_PEEK,
// then recv of those bytes), and fed to the parser, which checks it as on the copy path; the
// relay then writes the client's chunk-size line (this chunk's size, after the CRLF ending the
// previous chunk's data) and splices the data. A bad line leaves the parser failed: the copy
// path then ends the exchange (a truncated response and a close, never a wrong byte). The zero-
// size chunk, a small chunk or anything unusual (EOF, an error, a line longer than the peek
// allows) also hands back to the copy path, after the CRLF owed for the spliced data.
//
// Uploads: the rest of a Content-Length request body goes from the client socket to the backend
// socket the same way (a second relay), once what the client's read buffer held was written;
// the body source's parser is advanced over it, its body timeout runs only while the relay waits
// for the client, and the backend's I/O timeout starts again with every moved byte. A chunked
// upload is spliced chunk by chunk as a chunked response is, the roles swapped: the body source
// reads and checks the client's chunk-size lines (BodySource::body_splice_next_chunk), the relay
// writes rondel's own chunk-size line for each chunk to the backend before its data; a small
// chunk, the zero-size chunk (the trailer section), EOF or a bad line hand back to the copy path
// (a bad line: 400 to the client, the backend connection closed mid-body).
//
// Everything else (heads, close-delimited bodies, reframing to HTTP/1.0, TLS, HTTP/2) stays on
// the copy paths of exchange.cpp and exchange_response.cpp.
#include "rondel/proxy/backend_conn.h"
#include "rondel/proxy/backend_state.h"
#include "rondel/proxy/exchange.h"

namespace rondel::proxy {

namespace {

// The client's framing before the next `bytes` of spliced chunk data: the CRLF that ends the
// previous spliced chunk's data (when there is one), then the chunk-size line.
std::string_view chunk_prefix(uint64_t bytes, bool crlf_owed, char* buf) noexcept {
  size_t n = 0;
  if (crlf_owed) {
    buf[n++] = '\r';
    buf[n++] = '\n';
  }
  if (bytes > 0) n += http::chunk_header(bytes, buf + n);
  return {buf, n};
}

}  // namespace

bool Exchange::try_splice() noexcept {
  if (relay_ != nullptr) return true;
  if (st_.response != ResponseState::kStreaming || st_.conn->available() > 0 ||
      upload_relay_ != nullptr) {
    return false;  // (an upload still spliced: the response takes the copy path)
  }
  const http::Framing framing = resp_parser_.head().framing;
  uint64_t left = resp_parser_.body_left();
  uint64_t min = framing == http::Framing::kChunked ? kSpliceMinChunkBytes : kSpliceMinBytes;
  if (left < min) return false;
  int to = rq_.sink->sink_splice_fd(framing);
  int from = st_.conn->fd();
  if (to < 0 || from < 0) return false;
  char buf[net::SpliceRelay::kMaxPrefix];
  std::string_view prefix;
  if (framing == http::Framing::kChunked) prefix = chunk_prefix(left, false, buf);
  int err = 0;
  relay_ = net::SpliceRelay::start(worker_.splice_poller(), worker_.pipes(), from, to, left, this,
                                   &err, prefix);
  if (relay_ == nullptr) return false;  // no pipe or descriptor now: copy this body
  chunk_crlf_owed_ = framing == http::Framing::kChunked;
  rq_.sink->sink_spliced(prefix.size());
  st_.conn->pause_reading();
  st_.conn->shed_buffer();  // empty: the relay needs none, the copy path takes one again
  return true;
}

void Exchange::cancel_splice() noexcept {
  if (relay_ != nullptr) relay_->cancel();
  if (upload_relay_ != nullptr) upload_relay_->cancel();
  relay_ = upload_relay_ = nullptr;
}

void Exchange::on_splice_progress(size_t in, size_t out) noexcept {
  count_backend_bytes(in);
  if (out > 0) {
    resp_parser_.skip_body(out);
    rq_.sink->sink_spliced(out);
  }
  backend_progress();  // every moved byte starts the I/O inactivity timeout again
}

void Exchange::count_backend_bytes(size_t n) noexcept {
  if (n > 0 && st_.conn != nullptr && st_.conn->state() != nullptr) {
    st_.conn->state()->counters.bytes_in.fetch_add(n, std::memory_order_relaxed);
  }
}

net::SpliceNext Exchange::on_splice_segment_done() noexcept {
  if (resp_parser_.head().framing != http::Framing::kChunked || st_.conn == nullptr) {
    return net::SpliceNext::kEnd;  // a Content-Length body: it is all there
  }
  const int fd = st_.conn->fd();
  char line[kChunkLinePeek];
  // Each pass consumes at least one byte of the line; the parser bounds a line's length, this
  // bounds the passes (a longer line is left to the copy path).
  for (int pass = 0; pass < kChunkLinePasses && fd >= 0; ++pass) {
    const net::LinePart got = net::recv_line_part(fd, line, sizeof line);
    if (got.kind == net::LinePart::Kind::kWait) return net::SpliceNext::kWait;
    if (got.kind == net::LinePart::Kind::kEnd) break;  // the copy path reads it and ends
    const size_t take = got.n;
    count_backend_bytes(take);
    backend_progress();
    http::Step st = resp_parser_.feed(line, take);
    if (st.event != http::Event::kNeedMore || resp_parser_.last_chunk_seen()) break;
    uint64_t left = resp_parser_.body_left();
    if (left == 0) continue;  // the CRLF after the data, or part of the line: read on
    if (left < kSpliceMinChunkBytes) break;  // a small chunk: cheaper copied
    char buf[net::SpliceRelay::kMaxPrefix];
    std::string_view prefix = chunk_prefix(left, chunk_crlf_owed_, buf);
    relay_->extend(left, prefix);
    rq_.sink->sink_spliced(prefix.size());
    chunk_crlf_owed_ = true;
    return net::SpliceNext::kContinue;
  }
  end_chunk_splice();
  return net::SpliceNext::kEnd;
}

void Exchange::end_chunk_splice() noexcept {
  if (!chunk_crlf_owed_) return;
  char buf[net::SpliceRelay::kMaxPrefix];
  std::string_view crlf = chunk_prefix(0, true, buf);
  relay_->extend(0, crlf);
  rq_.sink->sink_spliced(crlf.size());
  chunk_crlf_owed_ = false;
}

void Exchange::on_splice_end(net::SpliceStop stop, int) noexcept {
  relay_ = nullptr;
  if (!running_ || st_.conn == nullptr) return;
  switch (stop) {
    case net::SpliceStop::kDone:
      // The copy path goes on: the end of a Content-Length body (kMessageEnd, then done), or the
      // rest of a chunked one (a small chunk, the last chunk and trailers, or a bad line).
      pump_response();
      return;
    case net::SpliceStop::kSourceEof:
    case net::SpliceStop::kSourceError:
      // The backend ended or broke mid-body: the client gets a truncated response and a close.
      worker_.log().log_limited(Level::kWarn, worker_.now_ms(), "backend_response_truncated",
                                "backend=" + st_.pool->backend(st_.backend).id());
      st_.backend_reusable = false;
      attempt_failed(AttemptEnd::kFailed, Failure::backend_error());
      return;
    case net::SpliceStop::kSinkError:
      st_.backend_reusable = false;
      finish(Outcome::kClientAbort);  // the client went away; the owner closes its side
      return;
    case net::SpliceStop::kSinkFull:
    case net::SpliceStop::kSourceDry:
    case net::SpliceStop::kBudgetUsed:
      return;  // not an end: the relay waits on its own
  }
}

// ---------------------------------------------------------------------------------------------
// Uploads

bool Exchange::try_splice_body() noexcept {
  if (upload_relay_ != nullptr) return true;
  const http::Framing framing = head().framing;
  if (to_backend_.pending || to_backend_.n > 0 ||
      (framing != http::Framing::kLength && framing != http::Framing::kChunked)) {
    return false;
  }
  const bool chunked = framing == http::Framing::kChunked;
  const int to = st_.conn->fd();
  if (to < 0) return false;
  uint64_t bytes = 0;
  const int from = rq_.body->body_splice_fd(chunked ? kSpliceMinChunkBytes : kSpliceMinBytes,
                                            &bytes);
  if (from < 0) return false;
  // The rest of the current chunk goes to the backend as a chunk of its own (the copy path
  // closed each piece it queued with its CRLF).
  char buf[net::SpliceRelay::kMaxPrefix];
  std::string_view prefix;
  if (chunked) prefix = chunk_prefix(bytes, false, buf);
  int err = 0;
  upload_relay_ = net::SpliceRelay::start(worker_.splice_poller(), worker_.pipes(), from, to,
                                          bytes, &upload_events_, &err, prefix);
  if (upload_relay_ == nullptr) return false;  // want_more() restarts the source's reading
  upload_crlf_owed_ = chunked;
  count_upload_framing(prefix.size());
  st_.body_pushed = true;  // the body leaves the client socket: it can never be sent again
  return true;
}

void Exchange::count_upload_framing(size_t n) noexcept {
  if (n > 0 && st_.conn != nullptr) {
    st_.pool->backend(st_.backend).counters.bytes_out.fetch_add(n, std::memory_order_relaxed);
  }
}

net::SpliceNext Exchange::on_upload_segment_done() noexcept {
  if (!running_ || head().framing != http::Framing::kChunked || upload_relay_ == nullptr) {
    return net::SpliceNext::kEnd;  // a Content-Length body: it is all there
  }
  const BodySource::SpliceChunk next = rq_.body->body_splice_next_chunk(kSpliceMinChunkBytes);
  char buf[net::SpliceRelay::kMaxPrefix];
  switch (next.kind) {
    case BodySource::SpliceChunk::Kind::kWait:
      return net::SpliceNext::kWait;
    case BodySource::SpliceChunk::Kind::kData: {
      std::string_view prefix = chunk_prefix(next.bytes, upload_crlf_owed_, buf);
      upload_relay_->extend(next.bytes, prefix);
      count_upload_framing(prefix.size());
      upload_crlf_owed_ = true;
      return net::SpliceNext::kContinue;
    }
    case BodySource::SpliceChunk::Kind::kCopy:
      break;
  }
  // Back to the copy path, after the CRLF owed for the spliced data (when the body failed, the
  // exchange fails next and the backend connection closes mid-body whatever went last).
  if (upload_crlf_owed_) {
    std::string_view crlf = chunk_prefix(0, true, buf);
    upload_relay_->extend(0, crlf);
    count_upload_framing(crlf.size());
    upload_crlf_owed_ = false;
  }
  return net::SpliceNext::kEnd;
}

void Exchange::on_upload_progress(size_t in, size_t out) noexcept {
  if (in > 0) rq_.body->body_spliced(in);
  if (out > 0 && st_.conn != nullptr) {
    st_.pool->backend(st_.backend).counters.bytes_out.fetch_add(out, std::memory_order_relaxed);
    st_.req_bytes_sent = true;
  }
  backend_progress();  // every moved byte starts the backend I/O inactivity timeout again
}

void Exchange::on_upload_wait(net::SpliceWait on) noexcept {
  if (!running_) return;
  rq_.body->body_splice_wait(on == net::SpliceWait::kSource ? BodySource::SpliceWait::kClient
                                                            : BodySource::SpliceWait::kBackend);
}

void Exchange::on_upload_end(net::SpliceStop stop) noexcept {
  upload_relay_ = nullptr;
  if (!running_ || st_.conn == nullptr) return;
  switch (stop) {
    case net::SpliceStop::kDone:
      pump_body();  // the source's parser is at the body's end: body_ended()
      return;
    case net::SpliceStop::kSourceEof:
    case net::SpliceStop::kSourceError:
      st_.backend_reusable = false;  // the backend got part of a body
      finish(Outcome::kClientAbort);  // the client went away mid-body; the owner closes
      return;
    case net::SpliceStop::kSinkError:
      attempt_failed(AttemptEnd::kFailed, Failure::backend_error());  // never retried
      return;
    case net::SpliceStop::kSinkFull:
    case net::SpliceStop::kSourceDry:
    case net::SpliceStop::kBudgetUsed:
      return;  // not an end: the relay waits on its own
  }
}

}  // namespace rondel::proxy
