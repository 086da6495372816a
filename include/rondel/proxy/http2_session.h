// Http2Session: one HTTP/2 client connection (nghttp2 server session), the codec beside
// Http1Session that drives one Exchange per stream.
//
// Each stream (Http2Stream) builds the http::RequestHead an HTTP/1 request for the same URL
// produces (:method, :path as the target, :authority as Host, the other fields), so routing and
// the hash key are identical; it is its Exchange's BodySource (its DATA frames; the stream's
// window opens only as the exchange consumes, so a slow backend stops that stream, not the
// connection) and its ResponseSink (the response head submitted as HEADERS, the body through a
// deferred data provider, bounded per stream). Backends stay HTTP/1.1. Exchanges come from the
// worker's pool and count in the bound like HTTP/1 requests. Loop thread only.
#pragma once

#include <nghttp2/nghttp2.h>
#include <uv.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rondel/http/message.h"
#include "rondel/http/request_rules.h"
#include "rondel/net/out_queue.h"
#include "rondel/proxy/body_source.h"
#include "rondel/proxy/client_connection.h"
#include "rondel/proxy/exchange.h"
#include "rondel/proxy/h2_mem.h"
#include "rondel/proxy/response_sink.h"
#include "rondel/proxy/snapshot.h"
#include "rondel/proxy/worker.h"
#include "rondel/tls/tls_transport.h"

namespace rondel::proxy {

class Http2Session;
class Http1Session;

// One request stream: its head, body source, response sink and Exchange. Pooled per worker
// (Worker::take_h2_stream), buffers and all.
class Http2Stream final : private BodySource, private ResponseSink, private ExchangeOwner {
 public:
  Http2Stream(Http2Session& s, int32_t id) : s_(&s), id_(id) {}
  ~Http2Stream();
  // Makes a pooled stream (Worker::take_h2_stream) stream `id` of `s`: gives back an exchange
  // still held, empties every buffer and keeps their memory (up to the pooled bounds).
  void reuse(Http2Session& s, int32_t id) noexcept;
  int32_t id() const noexcept { return id_; }
  Http2Session& session() const noexcept { return *s_; }

  // Header collection (nghttp2 callbacks). False: the header list is over its limit.
  bool add_header(std::string_view name, std::string_view value, uint64_t limit);
  // A trailer field (HEADERS after the head): not forwarded (the backend request's body is
  // framed by rondel, without a trailer section), but counted with the head against `limit`.
  // False: over it.
  bool add_trailer(std::string_view name, std::string_view value, uint64_t limit) noexcept {
    header_bytes_ += name.size() + value.size() + 32;
    return header_bytes_ <= limit;
  }
  // The head is whole (END_HEADERS): builds the RequestHead; false if it is not a valid request.
  // Builds the request head from the fields read, through the request rules HTTP/1 uses
  // (rondel/http/request_rules.h); a verdict means the request must not be forwarded.
  http::RuleVerdict finish_head(bool end_stream);
  // Answers a request that broke a request rule (its status, 400 mostly) without an exchange,
  // counted and logged as the HTTP/1 codec counts and logs a rejected request.
  void refuse(const http::RuleVerdict& v) noexcept;
  void start() noexcept;
  // A session over `t` (not started; null: out of memory), in the worker's list.
  static Http2Session* over(Worker& worker, net::Transport& t,
                            std::shared_ptr<const Snapshot> snap, ListenerRoute route) noexcept;
  // Starts a session made by over() (closes it if it has no listener; GOAWAY if draining).
  void begin() noexcept;
  void on_data(const uint8_t* data, size_t len) noexcept;
  void on_end_stream() noexcept;
  // The frame ending the response (END_STREAM) was sent. A request still arriving then is told
  // to stop without error (RST_STREAM NO_ERROR, RFC 9113 8.1): nothing reads its body any more,
  // so its window would never reopen.
  void on_response_sent() noexcept;
  // The stream closed (reset or done): an exchange still running ends as a client abort,
  // unless its whole response went out. True: the stream may be freed now; false: the
  // exchange's end frees it (Http2Session::stream_gone).
  bool on_close(uint32_t error_code) noexcept;
  // The data provider: how many queued response bytes (at most `len`) the next DATA frame
  // carries; they stay in place (NGHTTP2_DATA_FLAG_NO_COPY) until send_response.
  ssize_t read_response(size_t len, uint32_t* flags) noexcept;
  // nghttp2 sends that frame (its 9-byte header `framehd`, `length` payload bytes): hands header
  // and payload to the session as one piece. 0, or NGHTTP2_ERR_WOULDBLOCK when the session's
  // output is full for now (nghttp2 calls again), or NGHTTP2_ERR_CALLBACK_FAILURE.
  int send_response(const uint8_t* framehd, size_t length) noexcept;
  // The connection's output drained: resume an exchange that the sink stopped.
  void on_output_drained() noexcept;
  bool exchange_running() const noexcept { return ex_ != nullptr && ex_->running(); }
  // The stream waits for the client: for request body bytes, or for window to send response
  // bytes already queued (a zero-window stall), or it never started an exchange.
  bool client_stalled() const noexcept {
    return !exchange_running() || body_wanted_ || resp_off_ < resp_.size() || lent_len_ > 0;
  }
  // The connection closes: a running exchange ends as a client abort (the session frees the
  // stream after).
  void abort_exchange() noexcept {
    closed_ = false;
    gone_ = true;
    if (exchange_running()) ex_->abort();
  }

 private:
  BodyView peek() noexcept override;
  void consume(size_t n) noexcept override;
  bool want_more() noexcept override;
  BodyFailure failure() const noexcept override { return {400, "h2_body"}; }
  Interim sink_interim(const http::ResponseHead&) noexcept override { return Interim::kSkipped; }
  void sink_head(const http::ResponseHead& head) noexcept override;
  bool sink_body(std::string_view body) noexcept override;
  void sink_end() noexcept override;
  void sink_local(uint16_t status) noexcept override;
  bool sink_flush() noexcept override;
  bool sink_busy() const noexcept override;
  void on_exchange_done(Exchange& ex, Outcome outcome) noexcept override;
  // Submits the response head in nv_ (nv_[0] is set to :status here).
  void submit(uint16_t status, bool with_body) noexcept;
  ClientSide client_side() noexcept override;

  Http2Session* s_;
  int32_t id_;
  std::string hbuf_;                            // header names and values, back to back
  std::vector<uint32_t> hoff_;                  // per field: name offset, name len, value len
  std::vector<http::Header> headers_;
  http::RequestHead head_;
  uint64_t header_bytes_ = 0;
  Exchange* ex_ = nullptr;
  std::string body_;      // request body bytes received, [body_off_, end) not yet consumed
  size_t body_off_ = 0;
  size_t body_unacked_ = 0;  // consumed bytes not yet given back to the stream window
  std::string resp_;      // response body bytes queued, [resp_off_, end) not yet sent
  size_t resp_off_ = 0;
  // A body piece lent by the exchange (in the backend connection's buffer; sink_body), after
  // what resp_ holds: [lent_, lent_ + lent_len_) not yet sent.
  const char* lent_ = nullptr;
  size_t lent_len_ = 0;
  static constexpr uint64_t kLeftUnknown = UINT64_MAX;
  uint64_t resp_left_ = kLeftUnknown;  // Content-Length body bytes not yet given to sink_body
  std::string names_;              // the response head's lowercased field names
  std::vector<nghttp2_nv> nv_;     // the response head as submitted
  char code_[4] = {0};             // its :status
  uint64_t start_ns_ = 0, bytes_in_ = 0, bytes_out_ = 0;
  bool req_end_ = false;
  bool body_wanted_ = false;
  bool resp_submitted_ = false;
  bool resp_end_ = false;
  bool deferred_ = false;
  bool closed_ = false;  // closed by nghttp2 while the exchange ends: its end frees the stream
  bool gone_ = false;    // closed or reset: whoever closed it frees the stream
  mutable bool stalled_ = false;
};

// The worker's HTTP/2 state (its CodecWorkerState): nghttp2's heap for its sessions (H2Mem) and
// the pool of stream objects (buffers and all). Made by the first session; loop thread only.
struct Http2WorkerState final : CodecWorkerState {
  ~Http2WorkerState() override;
  static Http2WorkerState* of(Worker& w) noexcept;
  // A stream object made stream `id` of `s` (null: out of memory); give() takes it back.
  Http2Stream* take_stream(Http2Session& s, int32_t id) noexcept;
  void give_stream(Http2Stream* st) noexcept;
  H2Mem mem;  // every session of the worker is freed before it
  std::vector<Http2Stream*> free_streams;
};

class Http2Session final : public ClientCodec {
 public:
  explicit Http2Session(ClientConnection& conn) noexcept;
  ~Http2Session() override;

  // The codec (ClientCodec): the nghttp2 session over the connection's transport, its timeout
  // (idle, or body while streams are open), GOAWAY on drain (and when a reload removes the
  // listener), and the connection's close (every running stream ends as a client abort).
  void start() noexcept override;
  void on_alloc(uv_buf_t* buf) noexcept override;
  void on_read(ssize_t nread) noexcept override;
  void on_written(int status) noexcept override;
  void on_timeout() noexcept override;
  // Sends GOAWAY (no new streams) and closes once the open streams are done.
  void drain() noexcept override;
  void on_closing() noexcept override;
  void on_listener_removed() noexcept override { drain(); }
  void close_now() noexcept { conn_.close(); }

  Worker& worker() noexcept { return worker_; }
  nghttp2_session* ng() noexcept { return ng_; }
  const config::ListenerConfig* listener() const noexcept { return conn_.listener(); }
  const Pool* pool() const noexcept { return conn_.pool(); }
  std::string_view listener_name() const noexcept { return conn_.listener_name(); }
  std::string_view client_ip() noexcept { return conn_.client_ip(); }
  const tls::TlsTransport* tls() const noexcept { return conn_.tls(); }
  // The client connection's transport: its local (listener) address for a PROXY header sent to
  // a backend.
  const net::Transport* transport() const noexcept { return &conn_.transport(); }
  // Asks for what nghttp2 has to send to be written in this loop pass, after its I/O callbacks
  // (Worker::want_flush), so the frames that streams queue in one pass leave together.
  // Safe to call from anywhere, as often as wanted.
  void flush() noexcept;
  // The worker's flush pass: writes now.
  void on_flush() noexcept override {
    flush_queued_ = false;
    flush_now();
  }
  bool output_pending() const noexcept { return out_q_.pending; }
  // A DATA frame may be taken now: no write pending and this flush round not full.
  bool data_room() const noexcept {
    return !out_q_.pending && out_.size() + round_bytes_ < kOutChunk;
  }
  // Takes one DATA frame (header and payload contiguous) before returning: on a transport that
  // consumes on write (TLS), a large one is written at once after what is gathered before it,
  // so its payload is encrypted where it is (and its ciphertext leaves while still in cache);
  // a small one, or any on a plain socket, is copied into the gather. False: the write failed.
  bool put_data_frame(const char* frame, size_t len) noexcept;
  void stream_gone(Http2Stream* st) noexcept;

 private:
  bool init_session() noexcept;
  // Writes what nghttp2 has to send, now (not from inside mem_send/mem_recv).
  void flush_now() noexcept;
  void arm_timer() noexcept;
  // One incoming RST_STREAM from the token bucket (h2_max_resets_per_second, burst x10).
  bool take_reset_token() noexcept;

  friend struct Http2Callbacks;
  ClientConnection& conn_;
  Worker& worker_;
  Http2WorkerState* state_ = nullptr;  // the worker's (start: null only out of memory)
  net::Transport& transport_;  // the connection's
  nghttp2_session* ng_ = nullptr;
  char* buf_ = nullptr;
  static constexpr size_t kOutChunk = 64 * 1024;  // bytes of frames per flush round
  std::string out_;  // frames taken from nghttp2, being written
  size_t round_bytes_ = 0;  // DATA bytes written straight (put_data_frame) this flush round
  net::OutQueue out_q_;
  std::vector<Http2Stream*> streams_;
  // The last streams closed on this connection. nghttp2 keeps no closed stream
  // (no_closed_streams), so it ignores a HEADERS frame on any stream below the last it opened;
  // with these the session tells a stream the client closed or that closed normally
  // (STREAM_CLOSED, RFC 9113 5.1), one rondel reset (ignored: the client may have sent the frame
  // before it saw the reset, RFC 9113 5.1 "closed"), and one the client never opened
  // (PROTOCOL_ERROR, RFC 9113 5.1.1). Older closed streams count as never opened.
  struct ClosedStreams {
    enum class Seen : uint8_t { kNo, kClosed, kResetByUs };
    void add(int32_t id, bool reset_by_us) noexcept;
    Seen find(int32_t id) const noexcept;
    std::array<int32_t, 16> ids{};
    std::array<bool, 16> reset_by_us{};
    uint8_t next = 0;
  };
  // on_begin_frame's check of a HEADERS frame on stream `id` (see ClosedStreams): 0, or the
  // connection error to end the session with.
  uint32_t headers_on_old_stream(int32_t id) const noexcept;
  ClosedStreams closed_;
  double reset_tokens_ = 0;
  uint64_t reset_refill_ms_ = 0;
  bool flushing_ = false;
  bool flush_queued_ = false;  // in the worker's flush list for this pass
  bool in_recv_ = false;
  bool closing_ = false;
  bool goaway_sent_ = false;
};

}  // namespace rondel::proxy
