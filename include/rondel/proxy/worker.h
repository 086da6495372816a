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

#include "rondel/proxy/log.h"
#include "rondel/proxy/snapshot.h"

namespace rondel::proxy {

class ClientSession;
class BackendConn;

// Why a request was refused or failed before a full response; indexes Stats::rejected.
enum class Reject : uint8_t {
  kBadRequest, kUriTooLong, kHeaderTooLarge, kBodyTooLarge, kVersion, kUpgrade, kNoBackend,
  kBackendError, kTimeout, kClientTimeout, kMaxConnections, kCount
};
std::string_view reject_name(Reject r) noexcept;

struct WorkerStats {
  std::atomic<uint64_t> client_connections_open{0};
  std::atomic<uint64_t> client_connections_total{0};
  std::atomic<uint64_t> backend_connections_open{0};
  std::atomic<uint64_t> requests{0};
  std::atomic<uint64_t> retries{0};
  std::array<std::atomic<uint64_t>, static_cast<size_t>(Reject::kCount)> rejected{};
};

// Fixed-size I/O buffers recycled through a free list, so an idle connection holds none.
class BufferPool {
 public:
  static constexpr size_t kSize = 16 * 1024;
  ~BufferPool();
  char* get();
  void put(char* buf) noexcept;
  size_t outstanding() const noexcept { return outstanding_; }

 private:
  std::vector<char*> free_;
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
};

class Worker {
 public:
  Worker(uv_loop_t* loop, Logger& log, LogSink& access_log, WorkerStats& stats);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  uv_loop_t* loop() const noexcept { return loop_; }
  const std::shared_ptr<const Snapshot>& snapshot() const noexcept { return snapshot_; }
  void publish(std::shared_ptr<const Snapshot> snap);

  Logger& log() noexcept { return log_; }
  LogSink& access_log() noexcept { return access_log_; }
  WorkerStats& stats() noexcept { return stats_; }
  BufferPool& buffers() noexcept { return buffers_; }
  std::span<uint64_t> scratch(size_t words);  // grows once per snapshot, then reused
  uint64_t now_ms() const noexcept { return uv_now(loop_); }

  // Accepts one connection from `server` for listener `listener_name`.
  void accept(uv_stream_t* server, const std::string& listener_name);
  // Graceful stop: closes idle client connections now and the others as their exchange ends.
  void drain();
  // Closes every client connection now (drain deadline).
  void close_all();
  bool draining() const noexcept { return draining_; }
  size_t sessions() const noexcept { return sessions_; }
  size_t active_exchanges() const noexcept;

  // Session registry (intrusive list) for draining.
  void add_session(ClientSession* s) noexcept;
  void remove_session(ClientSession* s) noexcept;

  // Hook for the metrics module; called on the loop thread after each exchange.
  void (*on_exchange)(void* ctx, const ExchangeRecord& rec) = nullptr;
  void* on_exchange_ctx = nullptr;

 private:
  uv_loop_t* loop_;
  Logger& log_;
  LogSink& access_log_;
  WorkerStats& stats_;
  BufferPool buffers_;
  std::shared_ptr<const Snapshot> snapshot_;
  std::vector<uint64_t> scratch_;
  ClientSession* sessions_head_ = nullptr;
  size_t sessions_ = 0;
  bool draining_ = false;
};

}  // namespace rondel::proxy
