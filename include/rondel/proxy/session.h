// ClientSession: one client connection and the exchange it is running with a backend.
//
// A session parses requests one at a time (pipelined bytes wait in its buffer), picks a backend
// with the bounded-load rule, streams the request body to it and the response back, with one
// buffer per direction: a source is not read while a write of its bytes is pending, so memory
// per connection is bounded whatever the body size. Every in-flight increment made for an
// attempt is owned by the attempt's InFlightSlot, released at the attempt's one exit
// (end_attempt). Loop thread only.
#pragma once

#include <uv.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rondel/core/backend_set.h"
#include "rondel/http/parser.h"
#include "rondel/http/writer.h"
#include "rondel/net/timeout_queue.h"
#include "rondel/net/uv_util.h"
#include "rondel/proxy/exchange.h"
#include "rondel/net/out_queue.h"
#include "rondel/proxy/response_sink.h"
#include "rondel/proxy/snapshot.h"
#include "rondel/net/tcp_transport.h"
#include "rondel/tls/tls_transport.h"
#include "rondel/proxy/worker.h"

namespace rondel::proxy {

class BackendConn;

// A session's working state while a request is read or served: parsers, output queues, the
// rewritten heads. Taken from the worker's pool (Worker::take_exchange) when the first byte of a
// request arrives and given back when the connection is idle again, so an idle keep-alive
// connection holds only its ClientSession (handles, addresses, flags).
struct ExchangeBuffers {
  explicit ExchangeBuffers(const http::Limits& limits);
  http::Limits limits;  // the request parser's (per listener)
  http::RequestParser req_parser;
  http::ResponseParser resp_parser;
  net::OutQueue to_backend;
  net::OutQueue to_client;
  std::string req_head_out;
  std::string resp_head_out;
  http::ClientFraming client_framing;  // how the codec frames the current response to the client
  std::vector<uint64_t> tried;  // backends already tried for this request (bitset)
  Exchange ex;
  char client_ip[46] = {0};  // an IPv6 client's address as text, for this exchange
  uint8_t client_ip_len = 0;
};

class ClientSession final : private net::TransportEvents, private ResponseSink, private net::Timeout {
 public:
  // Accepts a connection from `server`. On failure the connection is dropped and counted.
  static void accept(Worker& worker, uv_stream_t* server, const std::string& listener);

  // Called by BackendConn.
  void on_backend_connected(BackendConn* conn, int status) noexcept;
  void on_backend_data(BackendConn* conn) noexcept;
  void on_backend_eof(BackendConn* conn, int status) noexcept;
  void on_backend_timeout(BackendConn* conn) noexcept;

  // Closes the connection now if it is between requests; otherwise after the current exchange.
  void drain() noexcept;
  // Closes the connection now, ending any exchange as a client abort.
  void close_now_public() noexcept { close_now(); }
  bool in_exchange() const noexcept { return phase_ == Phase::kConnecting || phase_ == Phase::kExchange; }
  // Test/diagnostic view: whether the session holds pooled exchange buffers.
  bool holds_exchange() const noexcept { return xb_ != nullptr; }
  // The worker's TimeoutQueue callback: the session's client timeout (idle, header, body or
  // linger, by phase) expired.
  static void on_timeout(net::Timeout* t) noexcept;

  // Intrusive list links (Worker owns the list).
  ClientSession* prev_ = nullptr;
  ClientSession* next_ = nullptr;

 private:
  enum class Phase : uint8_t { kIdle, kConnecting, kExchange, kLinger };
  enum class Outcome : uint8_t { kOk, kClientAbort, kBackendError, kTimeout, kRejected };
  // What to do once a cancelled backend write has called back.
  enum class PendingRetry : uint8_t { kNone, kRepick, kSameBackend };
  // Where an attempt's backend connection comes from.
  enum class ConnSource : uint8_t { kIdleOrNew, kNew };

  explicit ClientSession(Worker& worker) : worker_(worker) {}
  ~ClientSession();
  // The codec's side of the transport.
  void on_transport_alloc(uv_buf_t* buf) noexcept override;
  void on_transport_read(ssize_t nread) noexcept override;
  void on_transport_written(int status) noexcept override;
  void on_transport_closed() noexcept override;
  // The HTTP/1 codec's side of the response (HTTP/1 framing, 1xx rules, keep-alive decision).
  Interim sink_interim(const http::ResponseHead& head) noexcept override;
  void sink_head(const http::ResponseHead& head) noexcept override;
  bool sink_body(std::string_view body) noexcept override;
  void sink_end() noexcept override;
  bool sink_flush() noexcept override { return flush_to_client(); }
  bool sink_busy() const noexcept override { return xb_->to_client.pending; }
  ResponseSink& sink() noexcept { return *this; }
  bool closing() const noexcept { return transport_->closing(); }
  // Takes exchange buffers from the worker if the session has none; false if out of memory.
  bool take_exchange() noexcept;
  // Gives them back (connection idle between requests, nothing pending).
  void give_exchange() noexcept;
  // The current exchange; only while xb_ is held (in an exchange, or parsing a request head).
  Exchange& ex() noexcept { return xb_->ex; }
  const Exchange& ex() const noexcept { return xb_->ex; }
  std::string_view client_ip() const noexcept {
    return transport_->peer().family == 6 ? std::string_view{xb_->client_ip, xb_->client_ip_len}
                                   : transport_->peer().ipv4();
  }
  size_t head_bytes_pending() const noexcept {
    return xb_ != nullptr ? xb_->req_parser.head_bytes_pending() : 0;
  }

  // Client side.
  void pump_request() noexcept;
  void on_request_head() noexcept;
  void reject(uint16_t status, Reject reason, std::string_view why) noexcept;
  // The request parser failed: in the head, a refusal; in the body, the exchange is aborted.
  void request_error(bool in_head) noexcept;
  // Starts or stops reading the client. lazy = stop only if a byte or EOF arrives meanwhile (an
  // exchange that starts or ends with nothing more to read then costs no epoll change).
  void set_client_reading(bool on, bool lazy = false) noexcept;
  void arm_client_timer() noexcept;
  // The one client timeout in force (idle, header, body, linger): `ms` from now; 0 clears.
  void set_timeout(uint64_t ms) noexcept;
  void client_eof() noexcept;
  void close_now() noexcept;
  void linger_close() noexcept;
  bool flush_to_client() noexcept;
  bool flush_to_backend() noexcept;

  // Exchange.
  // Picks the backend for the next attempt (the routing decision; kNoBackend: none eligible).
  core::BackendIndex route_attempt(bool first_pick) noexcept;
  void start_attempt() noexcept;
  // Takes the in-flight slot on `b` and a connection (idle or new, per `source`).
  void begin_attempt(core::BackendIndex b, ConnSource source) noexcept;
  // The attempt's one exit: drops the connection (pooled only when served and clean), then the
  // backend's counters, the passive-health note and the in-flight slot release, in that order.
  void end_attempt(AttemptEnd end) noexcept;
  void note_passive_health(BackendState& st, AttemptEnd end) noexcept;
  void backend_ready() noexcept;
  void attempt_failed(AttemptEnd end, Reject reason, uint16_t status) noexcept;
  // Progress on the backend connection, in either direction: the I/O inactivity timeout starts
  // again (while the request is sent, and once the response head arrived).
  void backend_progress() noexcept;
  void pump_response() noexcept;
  // The backend's response head (1xx or final) was parsed: forwards it. False: wait for the
  // client write in progress (pump_response resumes).
  bool response_head() noexcept;
  // The backend closed after everything it sent was parsed.
  void response_eof() noexcept;
  // Queues one body piece on `q`, chunk-framed if `chunked`, flushing with `flush` when the
  // queue is full. False: a write is pending (or failed); the caller stops.
  bool queue_body(net::OutQueue& q, bool chunked, std::string_view body,
                  bool (ClientSession::*flush)()) noexcept;
  void response_done() noexcept;
  void finish_exchange(Outcome outcome) noexcept;
  void fail_exchange(uint16_t status, Reject reason, Outcome outcome) noexcept;
  // One access-log line for the current request; head_known = false (a request refused before
  // its head was complete) writes "-" for method and target.
  void log_access(Outcome outcome, bool head_known = true) noexcept;
  void drop_backend(bool reusable) noexcept;

  static void on_backend_written(uv_write_t* req, int status) noexcept;

  Worker& worker_;
  std::shared_ptr<const Snapshot> snap_;
  // The listener in `snap_` (config and pool; null when a reload removed it) and this
  // connection's slot in the listener's shared open count (max_connections), kept until the
  // connection closes even if the listener goes. The slot also names the listener, for reloads.
  const config::ListenerConfig* listener_cfg_ = nullptr;
  const Pool* listener_pool_ = nullptr;
  std::shared_ptr<ListenerState> listener_state_;
  // The client connection (its address: IPv6 formatted per exchange). The codec uses only the
  // Transport interface, `transport_`, chosen at accept: the TCP transport itself, or on a TLS
  // listener a TlsTransport over it.
  net::TcpTransport tcp_;
  std::unique_ptr<tls::TlsTransport> tls_;
  net::Transport* transport_ = &tcp_;

  // Client read buffer: bytes [rpos_, rlen_) are received and not yet consumed.
  char* buf_ = nullptr;
  uint32_t rpos_ = 0, rlen_ = 0;
  ExchangeBuffers* xb_ = nullptr;  // null while idle
  uint64_t bytes_from_client_ = 0, bytes_to_client_ = 0;  // for the access log and metrics
  Phase phase_ = Phase::kIdle;
  bool reading_ : 1 = false;            // the libuv read watcher is on
  bool want_read_ : 1 = false;          // the session wants bytes (false with reading_: lazily paused)
  bool client_eof_ : 1 = false;
  bool close_after_ : 1 = false;
  bool head_timer_armed_ : 1 = false;   // the header timeout is running for this request
  bool head_known_ : 1 = false;         // the current request's head was parsed whole
  bool close_after_flush_ : 1 = false;  // close (linger) once to_client is written
  PendingRetry retry_after_write_ = PendingRetry::kNone;  // retry once the cancelled write calls back
  bool delete_when_written_ : 1 = false;
};

}  // namespace rondel::proxy
