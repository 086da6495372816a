// Worker: one event loop's proxy context: the current snapshot, buffers, scratch and counters.
//
// Every client session and backend connection belongs to exactly one Worker and is only touched
// on its loop thread. The Worker owns no configuration of its own: it serves whatever Snapshot
// was last published to it.
#pragma once

#include <uv.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "rondel/http/parser.h"
#include "rondel/net/splice_relay.h"
#include "rondel/net/timeout_queue.h"
#include "rondel/proxy/log.h"
#include "rondel/proxy/router.h"
#include "rondel/proxy/snapshot.h"
#include "rondel/util/intrusive_list.h"

namespace rondel::proxy {

struct ClientConnectionTag;
class ClientCodec;
class BackendConnector;
class ClientConnection;
class Http2Session;
class BackendConn;
class Exchange;

// Why a request was refused or failed before a full response; indexes Stats::rejected.
enum class Reject : uint8_t {
  kBadRequest, kUriTooLong, kHeaderTooLarge, kBodyTooLarge, kVersion, kUpgrade, kNoBackend,
  kBackendError, kTimeout, kClientTimeout, kMaxConnections, kNoSubsetMember, kCount
};
std::string_view reject_name(Reject r) noexcept;
// The counter of a request refused by a parser with `status` (413: kBodyTooLarge, ...).
Reject reject_for_status(uint16_t status) noexcept;

struct WorkerStats {
  std::atomic<uint64_t> client_connections_open{0};
  std::atomic<uint64_t> client_connections_total{0};
  std::atomic<uint64_t> backend_connections_open{0};
  std::atomic<uint64_t> requests{0};
  std::atomic<uint64_t> retries{0};
  std::array<std::atomic<uint64_t>, static_cast<size_t>(Reject::kCount)> rejected{};
  // HTTP/2 client connections (Http2Session owns these counters).
  std::atomic<uint64_t> h2_connections{0};
  std::atomic<uint64_t> h2_connections_closed{0};
  std::atomic<uint64_t> h2_streams{0};
  std::array<std::atomic<uint64_t>, 14> h2_resets_received{};  // by error code (kH2ErrorNames)
  std::array<std::atomic<uint64_t>, 14> h2_resets_sent{};
  std::atomic<uint64_t> h2_goaways_sent{0};
  std::array<std::atomic<uint64_t>, 4> h2_floods{};  // by kH2Flood*
};

// The HTTP/2 defences that fired, as WorkerStats::h2_floods indexes them (kH2FloodNames).
constexpr size_t kH2FloodHeaderList = 0;  // a header list over h2_max_header_list_size: RST
constexpr size_t kH2FloodCalm = 1;        // GOAWAY ENHANCE_YOUR_CALM (rapid reset, ...)
constexpr size_t kH2FloodFrames = 2;      // SETTINGS/PING/CONTINUATION flood: connection closed
constexpr size_t kH2FloodTimeout = 3;     // the client stalled (zero window, idle): closed
// HTTP/2 error codes (RFC 9113 7) by value, as the reset metrics label them.
constexpr std::string_view kH2ErrorNames[] = {
    "no_error",       "protocol_error", "internal_error",     "flow_control_error",
    "settings_timeout", "stream_closed", "frame_size_error",  "refused_stream",
    "cancel",         "compression_error", "connect_error",   "enhance_your_calm",
    "inadequate_security", "http_1_1_required"};
constexpr std::string_view kH2FloodNames[] = {"header_list", "enhance_your_calm", "frame_flood",
                                              "stall_timeout"};

// Fixed-size I/O buffers recycled through a free list, so an idle connection holds none.
class BufferPool {
 public:
  static constexpr size_t kSize = 16 * 1024;
  // The larger class a backend connection reads into while a response body streams on the
  // copy path (fewer reads, parser calls and loop wake-ups per byte); given back at its end.
  static constexpr size_t kLargeSize = 64 * 1024;
  enum class Class : uint8_t { kSmall, kLarge };
  static constexpr size_t size_of(Class c) noexcept { return c == Class::kLarge ? kLargeSize : kSize; }
  ~BufferPool();
  // A buffer of size_of(c) bytes; put() takes it back with the same class.
  char* get(Class c = Class::kSmall);
  void put(char* buf, Class c = Class::kSmall) noexcept;
  size_t outstanding() const noexcept { return outstanding_; }

 private:
  static constexpr size_t kMaxFree[] = {1024, 64};  // reserve kept per class, beyond it freed
  std::vector<char*> free_[2];
  size_t outstanding_ = 0;
};

// Called for each completed exchange (for metrics); may be empty.
struct ExchangeRecord {
  const Pool* pool = nullptr;
  core::BackendIndex backend = core::kNoBackend;
  core::BackendIndex owner = core::kNoBackend;
  uint16_t status = 0;
  uint16_t hops = 0;
  uint64_t duration_us = 0;
  uint64_t bytes_in = 0, bytes_out = 0;
  std::string_view key;  // the routing key; empty when the request had none (least in-flight)
  uint64_t hash = 0;     // hash64 of the key (or the random/uri fallback hash) when keyed
  bool keyed = false;    // the pick used the bounded-load walk (false: least in-flight)
  uint8_t reason = 0;    // core::RouteReason of the final pick, when keyed
  // A body key (llm_prefix): 1 + its BodyKeySource (0: none), the body bytes read for it and
  // the time from the head to the decision.
  uint8_t body_key = 0;
  uint64_t key_offset = 0;
  uint64_t decision_us = 0;
};

// A codec's per-worker state (Worker::codec_state): pools and allocators of one protocol.
class CodecWorkerState {
 public:
  virtual ~CodecWorkerState() = default;
};

// Keeps `p` in `free` within Worker::kPoolReserve, else deletes it (a pool's give).
template <typename T>
void keep_or_delete(std::vector<T*>& free, T* p, size_t reserve) noexcept {
  if (free.size() >= reserve) {
    delete p;
    return;
  }
  try {
    free.push_back(p);  // allocates only when the reserve grows (doubling)
  } catch (...) {
    delete p;
  }
}

class Worker {
 public:
  // `id` (0 .. workers-1) indexes this worker's idle lists in BackendState.
  Worker(uv_loop_t* loop, Logger& log, LogSink& access_log, WorkerStats& stats, uint32_t id = 0);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  uv_loop_t* loop() const noexcept { return loop_; }
  uint32_t id() const noexcept { return id_; }
  // The snapshot this worker serves. Loop thread only (other threads: ask the daemon).
  const std::shared_ptr<const Snapshot>& snapshot() const noexcept { return snapshot_; }
  // Switches to `snap` (null at shutdown). Closes this worker's idle connections to backends
  // that are retired or gone with the old snapshot, and sends GOAWAY on the HTTP/2 connections
  // of listeners `snap` no longer has. Loop thread only.
  void publish(std::shared_ptr<const Snapshot> snap);

  Logger& log() noexcept { return log_; }
  LogSink& access_log() noexcept { return access_log_; }
  WorkerStats& stats() noexcept { return stats_; }
  BufferPool& buffers() noexcept { return buffers_; }
  // The pipes that spliced bodies go through (net/splice_pipe.h).
  net::PipePool& pipes() noexcept { return pipes_; }
  // The relays' readiness (net/splice_relay.h).
  net::SplicePoller& splice_poller() noexcept { return splice_poller_; }
  // The hop-by-hop marker of request heads that no parser of their own marks (HTTP/2's); its
  // tables are kept between heads.
  http::HopByHopMarker& hop_by_hop_marker() noexcept { return hop_by_hop_marker_; }
  // Per-worker state of one client codec (its pools, its allocator: CodecWorkerState), in slot
  // `slot` (the codec's ClientProtocol); null until the codec makes it on first use. Freed with
  // the worker, after every connection.
  static constexpr size_t kCodecSlots = 4;
  std::unique_ptr<CodecWorkerState>& codec_state(size_t slot) noexcept {
    return codec_states_[slot];
  }
  // The client connections' timeouts (idle, header, body, linger), on one timer.
  net::TimeoutQueue& timeouts() noexcept { return timeouts_; }
  // Pooled Exchanges (with their response parser, backend queue and rewritten head), reused from
  // a free list or allocated (null: out of memory). give_exchange keeps a bounded reserve
  // (kPoolReserve) and frees the strings of one whose capacity grew past
  // kMaxPooledStringCapacity; an Exchange given back with a backend write pending returns to the
  // pool on its callback.
  static constexpr size_t kMaxPooledStringCapacity = 16 * 1024;
  static constexpr size_t kPoolReserve = 1024;
  Exchange* take_exchange() noexcept;
  void give_exchange(Exchange* ex) noexcept;
  // A scratch string for formatting one log line (reused; loop thread only).
  std::string& log_line() noexcept { return log_line_; }
  std::span<uint64_t> scratch(size_t words);  // grows once per snapshot, then reused
  // Where this worker's exchanges get their backend connections (backend_link.h): the daemon's
  // BackendConns unless a test sets its own (which must outlive the worker's exchanges).
  BackendConnector& backend_connector() noexcept { return *connector_; }
  void set_backend_connector(BackendConnector& c) noexcept { connector_ = &c; }
  // Per-pool routing state of this worker (spill memory, hot-key detector); loop thread only.
  Router& routing() noexcept { return routing_; }
  uint64_t now_ms() const noexcept { return uv_now(loop_); }

  // Accepts one connection from `server` for listener `listener_name`.
  void accept(uv_stream_t* server, const std::string& listener_name);
  // Graceful stop: closes idle client connections now and the others as their exchange ends.
  void drain();
  // Closes every client connection now (drain deadline, shutdown) and the timeout timer: the
  // loop serves no client after this.
  void close_all();
  bool draining() const noexcept { return draining_; }
  // Open client sessions; any thread may read it (relaxed), e.g. the daemon's drain check.
  size_t sessions() const noexcept { return sessions_.load(std::memory_order_relaxed); }
  // Exchanges running now; any thread may read it (relaxed).
  size_t active_exchanges() const noexcept { return exchanges_.load(std::memory_order_relaxed); }
  // Called by exchanges as they start and end (loop thread; single writer, no RMW).
  void exchange_started() noexcept {
    exchanges_.store(exchanges_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  void exchange_ended() noexcept {
    exchanges_.store(exchanges_.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
  }

  // The client connections (ClientConnection registers itself while open), for draining.
  void add_connection(ClientConnection& c) noexcept;
  void remove_connection(ClientConnection& c) noexcept;
  // Output once per loop pass: a codec with output to write asks here (at most once until it is
  // served), and after the pass's I/O callbacks (a uv_check) the worker calls its on_flush(). So
  // an HTTP/2 response's head, body and end, and the responses of all the streams answered in
  // the same pass, leave as one write. cancel_flush: the codec is closing (it is forgotten; it
  // may ask again only after a later want_flush).
  void want_flush(ClientCodec* c) noexcept;
  void cancel_flush(ClientCodec* c) noexcept;

  // Hook for the metrics module; called on the loop thread after each exchange.
  void (*on_exchange)(void* ctx, const ExchangeRecord& rec) = nullptr;
  void* on_exchange_ctx = nullptr;

 private:
  void drain_removed_listeners() noexcept;
  static void on_flush_check(uv_check_t* h) noexcept;
  uv_loop_t* loop_;
  Logger& log_;
  LogSink& access_log_;
  WorkerStats& stats_;
  BufferPool buffers_;
  http::HopByHopMarker hop_by_hop_marker_;
  net::PipePool pipes_;
  net::SplicePoller splice_poller_;  // the relays' readiness (its epoll set made on first use)
  net::TimeoutQueue timeouts_;
  std::vector<Exchange*> free_exchanges_;
  std::array<std::unique_ptr<CodecWorkerState>, kCodecSlots> codec_states_;
  uv_check_t flush_check_;                 // runs while flush_ is not empty
  bool flush_check_ready_ = false;         // flush_check_ initialised (the first want_flush)
  bool flush_closed_ = false;              // close_all ran
  std::vector<ClientCodec*> flush_;        // codecs to flush this pass (null: cancelled)
  std::string log_line_;
  std::shared_ptr<const Snapshot> snapshot_;
  std::vector<uint64_t> scratch_;
  Router routing_;
  BackendConnector* connector_;
  util::IntrusiveList<ClientConnection, ClientConnectionTag> connections_;
  std::atomic<size_t> sessions_{0};  // connections_'s length, for other threads
  std::atomic<size_t> exchanges_{0};
  uint32_t id_ = 0;
  bool draining_ = false;
};

}  // namespace rondel::proxy
