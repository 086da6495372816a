// ClientSession: one client connection and the exchange it is running with a backend.
//
// A session parses requests one at a time (pipelined bytes wait in its buffer), picks a backend
// with the bounded-load rule, streams the request body to it and the response back, with one
// buffer per direction: a source is not read while a write of its bytes is pending, so memory
// per connection is bounded whatever the body size. Every in-flight increment made for an
// attempt is undone exactly once by release_attempt(). Loop thread only.
#pragma once

#include <uv.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rondel/core/backend_set.h"
#include "rondel/http/parser.h"
#include "rondel/http/writer.h"
#include "rondel/net/deadline.h"
#include "rondel/net/uv_util.h"
#include "rondel/proxy/snapshot.h"
#include "rondel/proxy/worker.h"

namespace rondel::proxy {

class BackendConn;

// A batch of buffers for one vectored write, with storage for the chunk-size lines it frames.
struct OutQueue {
  static constexpr int kMaxBufs = 12;
  uv_buf_t bufs[kMaxBufs];
  int n = 0;
  size_t bytes = 0;
  char chunk_heads[kMaxBufs][20];
  int heads = 0;
  uv_write_t req{};
  bool pending = false;

  bool room(int k) const noexcept { return n + k <= kMaxBufs; }
  void push(const char* p, size_t len) noexcept;
  void push_chunk_header(uint64_t len) noexcept;
  void clear() noexcept { n = 0; bytes = 0; heads = 0; }
  // Writes what is queued: 0 = all written now, 1 = a write is pending (cb will run), <0 = error.
  int flush(uv_stream_t* s, uv_write_cb cb) noexcept;
};

// A session's working state while a request is read or served: parsers, output queues, the
// rewritten heads. Taken from the worker's pool (Worker::take_exchange) when the first byte of a
// request arrives and given back when the connection is idle again, so an idle keep-alive
// connection holds only its ClientSession (handles, addresses, flags).
struct ExchangeBuffers {
  explicit ExchangeBuffers(const http::Limits& limits);
  http::Limits limits;  // the request parser's (per listener)
  http::RequestParser req_parser;
  http::ResponseParser resp_parser;
  OutQueue to_backend;
  OutQueue to_client;
  std::string req_head_out;
  std::string resp_head_out;
  std::vector<uint64_t> tried;  // backends already tried for this request (bitset)
  uv_shutdown_t shutdown_req{};
};

class ClientSession final : public net::HandleCloser {
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

  // Intrusive list links (Worker owns the list).
  ClientSession* prev_ = nullptr;
  ClientSession* next_ = nullptr;

 private:
  enum class Phase : uint8_t { kIdle, kConnecting, kExchange, kLinger };
  enum class Outcome : uint8_t { kOk, kClientAbort, kBackendError, kTimeout, kRejected };

  ClientSession(Worker& worker, std::string listener, const http::Limits& limits);
  ~ClientSession() override;
  void on_all_closed() noexcept override;
  // Takes exchange buffers from the worker if the session has none; false if out of memory.
  bool take_exchange() noexcept;
  // Gives them back (connection idle between requests, nothing pending).
  void give_exchange() noexcept;
  size_t head_bytes_pending() const noexcept {
    return xb_ != nullptr ? xb_->req_parser.head_bytes_pending() : 0;
  }

  // Client side.
  void pump_request() noexcept;
  void on_request_head() noexcept;
  void reject(uint16_t status, Reject reason, std::string_view why) noexcept;
  // Starts or stops reading the client. lazy = stop only if a byte or EOF arrives meanwhile (an
  // exchange that starts or ends with nothing more to read then costs no epoll change).
  void set_client_reading(bool on, bool lazy = false) noexcept;
  void arm_client_timer() noexcept;
  void client_eof() noexcept;
  void close_now() noexcept;
  void linger_close() noexcept;
  bool flush_to_client() noexcept;
  bool flush_to_backend() noexcept;

  // Exchange.
  void start_attempt() noexcept;
  void release_attempt() noexcept;
  void backend_ready() noexcept;
  void attempt_failed(bool connect_failure, Reject reason, uint16_t status) noexcept;
  bool may_retry() const noexcept;
  void pump_response() noexcept;
  void response_done() noexcept;
  void finish_exchange(Outcome outcome) noexcept;
  void fail_exchange(uint16_t status, Reject reason, Outcome outcome) noexcept;
  // One access-log line for the current request; head_known = false (a request refused before
  // its head was complete) writes "-" for method and target.
  void log_access(Outcome outcome, bool head_known = true) noexcept;
  void drop_backend(bool reusable) noexcept;

  static void on_alloc(uv_handle_t* h, size_t suggested, uv_buf_t* buf) noexcept;
  static void on_read(uv_stream_t* s, ssize_t nread, const uv_buf_t* buf) noexcept;
  static void on_client_written(uv_write_t* req, int status) noexcept;
  static void on_backend_written(uv_write_t* req, int status) noexcept;
  static void on_timer(uv_timer_t* t) noexcept;
  static void on_shutdown(uv_shutdown_t* req, int status) noexcept;

  Worker& worker_;
  std::string listener_;
  std::shared_ptr<const Snapshot> snap_;
  ListenerRoute route_;
  // This connection's slot in its listener's shared open count (max_connections).
  std::shared_ptr<ListenerState> listener_state_;
  uv_tcp_t tcp_{};
  uv_timer_t timer_{};
  net::Deadline deadline_;  // the one client timeout in force (idle, header, body, linger)
  char client_ip_[46] = {0};
  size_t client_ip_len_ = 0;

  // Client read buffer: bytes [rpos_, rlen_) are received and not yet consumed.
  char* buf_ = nullptr;
  size_t rpos_ = 0, rlen_ = 0;
  bool reading_ = false;       // the libuv read watcher is on
  bool want_read_ = false;     // the session wants bytes (false with reading_: lazily paused)
  bool client_eof_ = false;
  bool close_after_ = false;

  http::Limits limits_;
  ExchangeBuffers* xb_ = nullptr;  // null while idle
  Phase phase_ = Phase::kIdle;

  // The current exchange.
  const Pool* pool_ = nullptr;
  BackendConn* conn_ = nullptr;
  core::BackendIndex backend_ = core::kNoBackend;
  core::BackendIndex owner_ = core::kNoBackend;
  bool counted_ = false;        // in-flight incremented for the current attempt
  uint64_t hash_ = 0;
  bool keyed_ = false;          // the request had its hash key
  uint8_t reason_ = 0;          // core::RouteReason of the last keyed pick
  std::string_view key_;        // the hash key (a view into the request head); empty if none
  uint16_t hops_ = 0;           // backends passed over (full or excluded), all attempts
  uint32_t attempts_ = 0;
  bool req_done_ = false;       // request fully forwarded
  bool req_bytes_sent_ = false; // some request byte was handed to a backend socket
  bool resp_started_ = false;   // some response byte was sent to the client
  bool resp_head_seen_ = false; // the backend's final response head arrived
  bool resp_complete_ = false;  // the backend's response is complete (maybe not flushed)
  bool sent_continue_ = false;
  bool in_interim_ = false;         // parsing a 1xx response
  bool backend_reusable_ = true;    // the backend connection may go back to the idle pool
  bool head_timer_armed_ = false;   // the header timeout is running for this request
  bool head_known_ = false;         // the current request's head was parsed whole
  bool close_after_flush_ = false;  // close (linger) once to_client_ is written
  bool retry_after_write_ = false;  // a cancelled backend write must complete before a retry
  bool delete_when_written_ = false;
  http::ClientFraming client_framing_;
  uint16_t status_ = 0;
  uint64_t start_ns_ = 0;
  uint64_t bytes_from_client_ = 0, bytes_to_client_ = 0;
};

}  // namespace rondel::proxy
