// Http1Session: the HTTP/1 codec of a ClientConnection; it drives Exchanges one at a time.
//
// The session reads into one buffer, parses request heads (pipelined bytes wait in the buffer),
// runs each request as an Exchange (which routes, talks to the backends and owns the in-flight
// slot), and is that exchange's BodySource (the de-chunked request body, read only while the
// exchange asks for more: memory per connection stays bounded) and its ResponseSink (HTTP/1
// framing, 1xx rules, the keep-alive decision). It decides the client timeouts (idle, header,
// body, linger: the connection's one timeout) and writes the access-log line. It reads and
// writes through its connection's net::Transport (plain TCP, or TLS over it). Loop thread only.
#pragma once

#include <uv.h>

#include <cstdint>
#include <memory>
#include <string>

#include "rondel/http/parser.h"
#include "rondel/http/writer.h"
#include "rondel/net/out_queue.h"
#include "rondel/proxy/body_source.h"
#include "rondel/proxy/client_connection.h"
#include "rondel/proxy/exchange.h"
#include "rondel/proxy/response_sink.h"
#include "rondel/proxy/snapshot.h"
#include "rondel/proxy/worker.h"

namespace rondel::proxy {

// The codec's working state while a request is read or served: the request parser (with its
// listener's limits), the client output queue and the rewritten response head. Taken from the
// worker's pool (Worker::take_http1) when the first byte of a request arrives and given back when
// the connection is idle again, with the Exchange, so an idle keep-alive connection holds only its
// Http1Session (handles, addresses, flags).
struct Http1Buffers {
  explicit Http1Buffers(const http::Limits& limits);
  http::Limits limits;  // the request parser's (per listener)
  http::RequestParser req_parser;
  net::OutQueue to_client;
  std::string resp_head_out;
  http::ClientFraming client_framing;  // how the current response is framed to the client
  std::string_view piece;  // body bytes parsed and offered to the exchange, not yet consumed
  uint64_t req_start_ns = 0;  // when the current request's head was parsed
};

// The worker's pool of Http1Buffers (its CodecWorkerState): taken when a request's first byte
// arrives, given back when the connection is idle again; kept within Worker::kPoolReserve.
// Loop thread of `w` only.
Http1Buffers* take_http1_buffers(Worker& w, const http::Limits& limits) noexcept;
void give_http1_buffers(Worker& w, Http1Buffers* cb) noexcept;

class Http1Session final : public ClientCodec,
                           private ResponseSink,
                           private BodySource,
                           private ExchangeOwner {
 public:
  explicit Http1Session(ClientConnection& conn) noexcept : conn_(conn), worker_(conn.worker()) {}
  ~Http1Session() override;

  // The codec (ClientCodec): reading, writing, the connection's timeout (idle, header, body or
  // linger, by phase), draining (close now if between requests, else after the exchange), and
  // the connection's close (the running exchange ends as a client abort).
  void start() noexcept override;
  void on_alloc(uv_buf_t* buf) noexcept override;
  void on_read(ssize_t nread) noexcept override;
  void on_written(int status) noexcept override;
  void on_timeout() noexcept override;
  void drain() noexcept override;
  void on_closing() noexcept override;

  bool in_exchange() const noexcept { return phase_ == Phase::kExchange; }
  // Test/diagnostic view: whether the session holds pooled exchange state.
  bool holds_exchange() const noexcept { return ex_ != nullptr; }

 private:
  enum class Phase : uint8_t {
    kIdle,      // between requests, or reading a request head (no exchange runs)
    kExchange,  // an Exchange runs for the parsed head
    kLinger,    // half-closed: reading and discarding until the client closes
  };

  // The response sink: HTTP/1 framing, 1xx rules, keep-alive decision (http1_response.cpp).
  Interim sink_interim(const http::ResponseHead& head) noexcept override;
  void sink_head(const http::ResponseHead& head) noexcept override;
  bool sink_body(std::string_view body) noexcept override;
  void sink_end() noexcept override;
  void sink_local(uint16_t status) noexcept override;
  bool sink_flush() noexcept override { return flush_to_client(); }
  bool sink_busy() const noexcept override { return cb_->to_client.pending; }
  int sink_splice_fd(http::Framing framing) noexcept override;
  bool sink_splices(http::Framing framing) const noexcept override;
  void sink_spliced(uint64_t bytes) noexcept override { bytes_to_client_ += bytes; }
  // The body source: the request body from the read buffer (http1_response.cpp).
  BodyView peek() noexcept override;
  void consume(size_t n) noexcept override { cb_->piece.remove_prefix(n); }
  bool want_more() noexcept override;
  BodyFailure failure() const noexcept override;
  int body_splice_fd(uint64_t min, uint64_t* bytes) noexcept override;
  void body_spliced(uint64_t n) noexcept override;
  void body_splice_wait(SpliceWait on) noexcept override;
  SpliceChunk body_splice_next_chunk(uint64_t min) noexcept override;
  // What one read of a chunk-size line takes at most, and how many reads one line may take.
  static constexpr size_t kChunkLinePeek = 64;
  static constexpr int kChunkLinePasses = 8;
  // The exchange's end: access log, metrics, then keep-alive or close.
  void on_exchange_done(Exchange& ex, Outcome outcome) noexcept override;
  ClientSide client_side() noexcept override;

  net::Transport& transport() noexcept { return conn_.transport(); }
  const net::Transport& transport() const noexcept { return conn_.transport(); }
  bool closing() const noexcept { return conn_.closing(); }
  // Takes the codec buffers and an Exchange from the worker if the session has none; false if
  // out of memory.
  bool take_state() noexcept;
  // Gives them back (connection idle between requests, nothing pending).
  void give_state() noexcept;
  std::string_view client_ip() noexcept { return conn_.client_ip(); }
  size_t head_bytes_pending() const noexcept {
    return cb_ != nullptr ? cb_->req_parser.head_bytes_pending() : 0;
  }

  void pump_request() noexcept;
  void on_request_head() noexcept;
  // The listener's forwarding settings and pool for the request just parsed.
  ExchangeRequest exchange_request() noexcept;
  // Answers rondel's own status for a request refused before or instead of an exchange,
  // counts and logs it, then closes after the answer.
  void reject(const Failure& f, std::string_view why) noexcept;
  // Starts or stops reading the client. lazy = stop only if a byte or EOF arrives meanwhile (an
  // exchange that starts or ends with nothing more to read then costs no epoll change).
  void set_client_reading(bool on, bool lazy = false) noexcept;
  void arm_client_timer() noexcept;
  // The one client timeout in force (idle, header, body, linger): `ms` from now; 0 clears.
  void set_timeout(uint64_t ms) noexcept { conn_.set_timeout(ms); }
  void client_eof() noexcept;
  void close_now() noexcept { conn_.close(); }
  void linger_close() noexcept;
  bool flush_to_client() noexcept;
  // Queues one response body piece, chunk-framed if the client framing is; false: a write is
  // pending (or failed).
  bool queue_client_body(std::string_view body) noexcept;
  // Answers Expect: 100-continue the first time the exchange asks for the body.
  void send_continue() noexcept;

  ClientConnection& conn_;
  Worker& worker_;

  // Client read buffer: bytes [rpos_, rlen_) are received and not yet parsed. Small, except
  // while a request body larger than it streams on the copy path of a transport that cannot
  // splice (TLS): then a large one (want_more), given back at the exchange's end.
  char* buf_ = nullptr;
  uint32_t rpos_ = 0, rlen_ = 0;
  BufferPool::Class buf_class_ = BufferPool::Class::kSmall;
  size_t buf_capacity() const noexcept { return BufferPool::size_of(buf_class_); }
  void put_buffer() noexcept;
  // From want_more, the buffer empty: takes the large class for a large body that is copied.
  void grow_for_body() noexcept;
  Http1Buffers* cb_ = nullptr;  // null while idle
  Exchange* ex_ = nullptr;      // null while idle
  uint64_t bytes_from_client_ = 0, bytes_to_client_ = 0;  // for the access log and metrics
  Phase phase_ = Phase::kIdle;
  BodyState body_state_ = BodyState::kMore;
  bool reading_ : 1 = false;            // the libuv read watcher is on
  bool want_read_ : 1 = false;          // the session wants bytes (false with reading_: lazily paused)
  bool body_wanted_ : 1 = false;        // the exchange waits for body bytes (want_more)
  bool client_eof_ : 1 = false;
  bool close_after_ : 1 = false;
  bool head_timer_armed_ : 1 = false;   // the header timeout is running for this request
  bool head_known_ : 1 = false;         // the current request's head was parsed whole
  bool close_after_flush_ : 1 = false;  // close (linger) once to_client is written
  bool sent_continue_ : 1 = false;      // rondel answered this request's Expect: 100-continue
};

}  // namespace rondel::proxy
