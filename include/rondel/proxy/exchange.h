// Exchange: one request and its response, driven against the backends, knowing nothing of the
// client's protocol. It takes a parsed request head and a BodySource, routes (Router::route),
// owns the backend attempt (its connection, its InFlightSlot, its retries and I/O inactivity
// timeouts), forwards the request re-framed for the backend, and streams the response into a
// ResponseSink. It reports its end to its ExchangeOwner (the client codec), which writes the
// access log and decides about the client connection.
//
// An HTTP/1 session runs one Exchange at a time; an HTTP/2 session can run one per stream.
// Exchanges come from the worker's pool (Worker::take_exchange) with their parser, queue and
// strings, so running one allocates nothing in steady state. Loop thread only.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "rondel/http/parser.h"
#include "rondel/http/writer.h"
#include "rondel/net/out_queue.h"
#include "rondel/net/splice_relay.h"
#include "rondel/net/transport.h"
#include "rondel/proxy/backend_link.h"
#include "rondel/proxy/body_key.h"
#include "rondel/proxy/body_source.h"
#include "rondel/proxy/exchange_rules.h"
#include "rondel/proxy/request_end.h"
#include "rondel/proxy/response_sink.h"
#include "rondel/proxy/worker.h"

namespace rondel::proxy {

class Exchange;
struct RouteKey;

// How an exchange ended, as the access log names it (outcome_name).
// kNoSubsetMember: answered 503 because no member of the request's subset was eligible.
enum class Outcome : uint8_t { kOk, kClientAbort, kBackendError, kTimeout, kRejected,
                               kNoSubsetMember };
std::string_view outcome_name(Outcome o) noexcept;

// A data-plane failure as one value: the status rondel answers (when no response started), the
// counter it is counted in (WorkerStats::rejected) and the outcome the access log shows. Made by
// the named constructors, so a status, its counter and its outcome cannot disagree.
struct Failure {
  uint16_t status = 0;
  Reject reject = Reject::kBadRequest;
  Outcome outcome = Outcome::kRejected;

  // The backend failed (connect, I/O, a malformed response): 502.
  static constexpr Failure backend_error() noexcept {
    return {502, Reject::kBackendError, Outcome::kBackendError};
  }
  // The backend did not answer in time (connect, header or I/O timeout): 504.
  static constexpr Failure backend_timeout() noexcept {
    return {504, Reject::kTimeout, Outcome::kTimeout};
  }
  // No backend of the pool can take the request: 503.
  static constexpr Failure no_backend() noexcept {
    return {503, Reject::kNoBackend, Outcome::kRejected};
  }
  // No member of the request's subset can take it: 503.
  static constexpr Failure no_subset_member() noexcept {
    return {503, Reject::kNoSubsetMember, Outcome::kNoSubsetMember};
  }
  // The client stopped sending its body: 408, a client abort.
  static constexpr Failure client_body_timeout() noexcept {
    return {408, Reject::kClientTimeout, Outcome::kClientAbort};
  }
  // The client's request is refused with `status` (400, 408, 413, 503, ...), counted by status.
  static Failure refused(uint16_t status, Reject reject) noexcept {
    return {status, reject, Outcome::kRejected};
  }
  static Failure refused(uint16_t status) noexcept {
    return refused(status, reject_for_status(status));
  }
};

// Who runs an exchange: hears its end once.
class ExchangeOwner {
 public:
  // The exchange ended with `outcome`; ex.state() is final (status, pool, backend, attempts).
  // When ex.state().response is kLocal, the sink holds rondel's own status to write out.
  // Every call chain into the exchange ends with this call: the owner may start the next
  // exchange on the same object from here.
  virtual void on_exchange_done(Exchange& ex, Outcome outcome) noexcept = 0;
  // The client side of the request, for its end records (request_end.h), read once just before
  // on_exchange_done.
  virtual ClientSide client_side() noexcept = 0;

 protected:
  ~ExchangeOwner() = default;
};

// What an exchange runs: all must outlive it (until on_exchange_done).
struct ExchangeRequest {
  const http::RequestHead* head = nullptr;
  http::ForwardRequest forward;  // the rewrite inputs (client address, X-Forwarded-* setting)
  const Pool* pool = nullptr;     // the listener's pool, in the snapshot the owner holds
  std::string_view listener;      // the listener's name (subset selection: Pool::select_subset)
  BodySource* body = nullptr;
  ResponseSink* sink = nullptr;
  ExchangeOwner* owner = nullptr;
  // The client's connection: its local (listener) address for a PROXY header sent to the
  // backend (a pool's send_proxy_protocol); nullptr: unknown.
  const net::Transport* client = nullptr;
};

class Exchange final : private net::SpliceEvents, private BackendEvents {
 public:
  explicit Exchange(Worker& worker);
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;

  enum class Start : uint8_t {
    kStarted,  // running: on_exchange_done follows (perhaps already called)
    kNoKey,    // the pool rejects requests without their hash key: nothing started
  };
  // Resets the state by value and starts routing and the first attempt.
  Start start(const ExchangeRequest& rq) noexcept;

  // The body source has more (after a want_more() that returned false).
  void on_body_available() noexcept;
  // The sink's pending write completed: the response moves on (or the exchange ends).
  void on_sink_drained() noexcept;
  // Ends the exchange with rondel's `status` while no final response started (else it ends and
  // the owner closes); counts `reason`. For the owner's own failures (a client body timeout).
  void fail(const Failure& f) noexcept;
  // The client went away: ends the exchange as a client abort (no response).
  void abort() noexcept { finish(Outcome::kClientAbort); }

  bool running() const noexcept { return running_; }
  const ExchangeState& state() const noexcept { return st_; }


  // The worker's pool: an exchange with a backend write still pending (a cancelled write calls
  // back once its connection closed) cannot be reused before that callback.
  bool write_pending() const noexcept { return to_backend_.pending; }
  void set_pool_on_written() noexcept { pool_on_written_ = true; }
  // Forgets the last request; strings grown past Worker::kMaxPooledStringCapacity are freed.
  void recycle() noexcept;
  size_t head_capacity() const noexcept { return req_head_out_.capacity(); }

 private:
  // The backend connection's reports (BackendEvents).
  void on_backend_connected(BackendLink* conn, int status) noexcept override;
  void on_backend_data(BackendLink* conn) noexcept override;
  void on_backend_eof(BackendLink* conn, int status) noexcept override;
  void on_backend_timeout(BackendLink* conn) noexcept override;
  // Where the current attempt's connection stands.
  enum class Attempt : uint8_t { kNone, kConnecting, kConnected };
  // What to do once a cancelled backend write has called back.
  enum class PendingRetry : uint8_t { kNone, kRepick, kSameBackend };
  // Where an attempt's backend connection comes from.
  enum class ConnSource : uint8_t { kIdleOrNew, kNew };

  const http::RequestHead& head() const noexcept { return *rq_.head; }
  // The body key (exchange_body_key.cpp): reads the body through body_key_ until the key is
  // known, then routes on it and sends the body from body_key_ (held bytes first).
  void start_body_key() noexcept;
  void pump_key() noexcept;
  // The key from the head under hash_key and missing_key (route_key).
  RouteKey head_route_key() const noexcept;
  // Routes on `rk` (as start() does once the key is known): kReject answers 400.
  void route_by(const RouteKey& rk) noexcept;
  // The request was written whole to the backend: the held body bytes can go.
  void request_written() noexcept;
  // Attempts (exchange.cpp).
  // Routes the attempt and claims its in-flight slot (Router::route with st_.slot).
  core::BackendIndex route_attempt(bool first_pick) noexcept;
  void start_attempt() noexcept;
  // The stale-connection retry: the slot on the same backend taken back, a fresh connection.
  void retry_same_backend() noexcept;
  // Precondition: st_.slot is held on b (route_attempt or retry_same_backend took it).
  void begin_attempt(core::BackendIndex b, ConnSource source) noexcept;
  // The attempt's one exit: drops the connection (pooled only when served and clean), then the
  // backend's counters, the passive-health note and the in-flight slot release, in that order.
  void end_attempt(AttemptEnd end) noexcept;
  void note_passive_health(BackendState& st, AttemptEnd end) noexcept;
  void backend_ready() noexcept;
  void attempt_failed(AttemptEnd end, const Failure& f) noexcept;
  // Progress on the backend connection, in either direction: the I/O inactivity timeout starts
  // again (while the request is sent, and once the response head arrived).
  void backend_progress() noexcept;
  void drop_backend(bool reusable) noexcept;
  void finish(Outcome outcome) noexcept;
  // The request body (exchange.cpp): pulls from the source into the backend queue.
  void pump_body() noexcept;
  // Queues one body piece (consumed from the source), chunk-framed when the request is.
  // False: a write is pending (or failed); the caller stops.
  bool queue_body(std::string_view body) noexcept;
  void body_ended() noexcept;
  bool flush_to_backend() noexcept;
  static void on_backend_written(uv_write_t* req, int status) noexcept;
  // The response (exchange_response.cpp).
  void pump_response() noexcept;
  bool response_head() noexcept;
  void response_eof() noexcept;
  void response_done() noexcept;
  // The sink could not take more now: stop reading the backend until it drains.
  void sink_stalled() noexcept;
  bool flush_sink() noexcept;
  // The rest of a Content-Length body of at least kSpliceMinBytes, with nothing buffered,
  // goes backend socket -> pipe -> client socket when the sink offers its socket: true when a
  // relay took it over (exchange_splice.cpp).
  // A chunked body's chunk data of at least kSpliceMinChunkBytes is spliced the same way, one
  // chunk at a time, its chunk-size lines parsed here (on_splice_segment_done).
  bool try_splice() noexcept;
  void cancel_splice() noexcept;
  void count_backend_bytes(size_t n) noexcept;
  void on_splice_progress(size_t in, size_t out) noexcept override;
  net::SpliceNext on_splice_segment_done() noexcept override;
  // Hands a chunked body back to the copy path: the relay writes the CRLF owed after the last
  // spliced chunk's data first.
  void end_chunk_splice() noexcept;
  void on_splice_end(net::SpliceStop stop, int error) noexcept override;
  // The rest of a Content-Length request body of at least kSpliceMinBytes, with nothing queued
  // for the backend, goes client socket -> pipe -> backend socket when the body source offers
  // its socket: true when a relay took it over. The body then counts as sent (never retried).
  // A chunked body's chunk data of at least kSpliceMinChunkBytes goes the same way, chunk by
  // chunk (on_upload_segment_done), re-framed with rondel's chunk-size lines.
  bool try_splice_body() noexcept;
  net::SpliceNext on_upload_segment_done() noexcept;
  // Framing bytes the upload relay writes to the backend: counted as sent to it.
  void count_upload_framing(size_t n) noexcept;
  void on_upload_progress(size_t in, size_t out) noexcept;
  void on_upload_end(net::SpliceStop stop) noexcept;
  void on_upload_wait(net::SpliceWait on) noexcept;
  // The upload relay's events (the response relay reports to the Exchange itself).
  class UploadEvents final : public net::SpliceEvents {
   public:
    explicit UploadEvents(Exchange& ex) noexcept : ex_(ex) {}
    void on_splice_progress(size_t in, size_t out) noexcept override {
      ex_.on_upload_progress(in, out);
    }
    void on_splice_end(net::SpliceStop stop, int) noexcept override { ex_.on_upload_end(stop); }
    void on_splice_wait(net::SpliceWait on) noexcept override { ex_.on_upload_wait(on); }
    net::SpliceNext on_splice_segment_done() noexcept override {
      return ex_.on_upload_segment_done();
    }

   private:
    Exchange& ex_;
  };
  // Below this, setting up a relay (a pipe from the pool, two epoll_ctl calls, the splices)
  // costs more than copying.
  static constexpr uint64_t kSpliceMinBytes = 64 * 1024;
  // A relay already running moves a further chunk for a peek, a recv and a short write more
  // than its data's splices; below this a chunk is copied (a chosen bound, not a measured
  // crossover).
  static constexpr uint64_t kSpliceMinChunkBytes = 16 * 1024;
  // What one peek reads of a chunk-size line, and how many peeks one line may take.
  static constexpr size_t kChunkLinePeek = 64;
  static constexpr int kChunkLinePasses = 8;

  Worker& worker_;
  ExchangeRequest rq_;
  BodyKey body_key_;     // hash_key: llm_prefix: the body read for the key, then replayed
  bool keying_ = false;  // reading the body for the key: nothing routed yet
  ExchangeState st_;
  http::ResponseParser resp_parser_;
  net::OutQueue to_backend_;
  std::string req_head_out_;
  std::vector<uint64_t> tried_;  // backends already tried for this request (bitset)
  net::SpliceRelay* relay_ = nullptr;  // moving the response body, when it is spliced
  bool chunk_crlf_owed_ = false;       // spliced chunk data went out without its CRLF yet
  UploadEvents upload_events_{*this};
  net::SpliceRelay* upload_relay_ = nullptr;  // moving the request body, when it is spliced
  bool upload_crlf_owed_ = false;  // spliced request chunk data went out without its CRLF yet
  Attempt attempt_ = Attempt::kNone;
  PendingRetry retry_after_write_ = PendingRetry::kNone;
  bool running_ = false;
  bool pool_on_written_ = false;  // given back with a write pending: back to the pool on its callback
};

}  // namespace rondel::proxy
