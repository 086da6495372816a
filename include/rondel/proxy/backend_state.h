// A backend's live state: in-flight count, health, counters and its pool of idle connections.
//
// BackendState outlives configuration snapshots: a reload that keeps a backend id keeps the same
// object, so its in-flight count, health and pooled connections carry over. It is shared by the
// snapshots that name it (shared_ptr) and found again by BackendRegistry on the next reload.
//
// Threads: in-flight, health, counters and open_connections are atomics shared by every worker
// (so the bounded-load cap is global). Idle connections are libuv handles bound to one loop, so
// each worker has its own idle list, indexed by the worker's id; only that worker touches it.
#pragma once

#include <sys/socket.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

namespace rondel::proxy {

class BackendConn;

enum class Health : uint8_t { kUp, kDown, kEjected };

// Upper bound of `workers:` (config validates 1..64); sizes the per-worker idle lists.
inline constexpr uint32_t kMaxWorkers = 64;

struct BackendCounters {
  std::atomic<uint64_t> requests{0};
  std::atomic<uint64_t> responses_2xx{0}, responses_3xx{0}, responses_4xx{0}, responses_5xx{0};
  std::atomic<uint64_t> errors{0};           // exchanges that ended without a full response
  std::atomic<uint64_t> connect_errors{0};
  std::atomic<uint64_t> timeouts{0};
  std::atomic<uint64_t> retries{0};          // requests retried away from this backend
  std::atomic<uint64_t> spill_in{0};         // requests served here although another was home
  std::atomic<uint64_t> bytes_in{0};         // response bytes received from the backend
  std::atomic<uint64_t> bytes_out{0};        // request bytes sent to the backend
  std::atomic<uint64_t> health_checks_ok{0};      // active health checks that passed
  std::atomic<uint64_t> health_checks_failed{0};  // active health checks that failed
};

class BackendState {
 public:
  BackendState(std::string pool, std::string id, const sockaddr_storage& addr,
               std::string addr_text);
  // Closes what is left in the idle lists. Every worker empties its own list when a snapshot
  // without this backend reaches it (Worker::publish), so on a multi-worker daemon the lists are
  // empty here; a single-worker daemon may destroy the state on the loop thread with idle ones.
  ~BackendState();
  BackendState(const BackendState&) = delete;
  BackendState& operator=(const BackendState&) = delete;

  const std::string& pool() const noexcept { return pool_; }
  const std::string& id() const noexcept { return id_; }
  const sockaddr_storage& addr() const noexcept { return addr_; }
  const std::string& addr_text() const noexcept { return addr_text_; }

  // In-flight requests assigned to this backend. Incremented by the pick, decremented exactly
  // once when the exchange ends, whatever the ending.
  std::atomic<uint32_t> in_flight{0};
  BackendCounters counters;

  Health health() const noexcept { return health_.load(std::memory_order_relaxed); }
  bool usable() const noexcept { return health() == Health::kUp; }
  void set_health(Health h) noexcept { health_.store(h, std::memory_order_relaxed); }
  // Changes the health from `from` to `to` unless another thread changed it first.
  bool change_health(Health from, Health to) noexcept {
    return health_.compare_exchange_strong(from, to, std::memory_order_relaxed);
  }

  // Passive health: a connect failure or a 5xx; returns true when it crosses `threshold`.
  bool note_failure(uint32_t threshold) noexcept;
  void note_success() noexcept {
    if (consecutive_failures_.load(std::memory_order_relaxed) != 0) {
      consecutive_failures_.store(0, std::memory_order_relaxed);
    }
  }
  // Failures in a row seen on real traffic (the daemon tick ejects on 5xx runs with it).
  uint32_t consecutive_failures() const noexcept {
    return consecutive_failures_.load(std::memory_order_relaxed);
  }
  // After an ejection's cool-down the backend is let back on probation: `n` = threshold - 1,
  // so one more failure ejects it again, one success clears the record.
  void set_consecutive_failures(uint32_t n) noexcept {
    consecutive_failures_.store(n, std::memory_order_relaxed);
  }
  std::atomic<uint64_t> ejected_until_ms{0};  // set by whichever worker ejects

  // Slow start (loop thread): loop time (ms) at which the backend came up, was added or
  // recovered; 0 = not ramping. Pool::refresh_weights turns it into an effective weight.
  uint64_t ramp_start_ms = 0;
  // Active health checks (loop thread): results in a row, kept across reloads.
  uint32_t check_successes = 0;
  uint32_t check_failures = 0;
  // Connect failures already acted on by DNS discovery (compared with counters.connect_errors).
  uint64_t connect_errors_seen = 0;

  // Idle keep-alive connections of worker `w` (that worker's loop thread only). pop_idle
  // returns nullptr when empty. remove_idle finds the list through the connection's worker.
  BackendConn* pop_idle(uint32_t w) noexcept;
  void push_idle(uint32_t w, BackendConn* conn) noexcept;
  void remove_idle(BackendConn* conn) noexcept;
  // Closes worker `w`'s idle connections (its loop thread).
  void close_idle(uint32_t w) noexcept;
  size_t idle_count(uint32_t w) const noexcept { return idle_[w].count; }
  // All workers' idle connections (any thread; a relaxed read, for views and metrics).
  size_t idle_count() const noexcept { return idle_total_.load(std::memory_order_relaxed); }
  std::atomic<uint32_t> open_connections{0};  // all connections to this backend, idle or busy

  // Set by the daemon (before publishing) when the newest snapshot no longer names this state:
  // a connection finishing an exchange then closes instead of going idle.
  std::atomic<bool> retired{false};

 private:
  friend class BackendConn;
  std::string pool_, id_;
  sockaddr_storage addr_;
  std::string addr_text_;
  std::atomic<Health> health_{Health::kUp};
  std::atomic<uint32_t> consecutive_failures_{0};
  struct alignas(64) IdleList {       // one cache line per worker: no false sharing
    BackendConn* head = nullptr;       // intrusive doubly linked list, most recent first
    uint32_t count = 0;
  };
  std::array<IdleList, kMaxWorkers> idle_{};
  std::atomic<uint32_t> idle_total_{0};
};

// Finds the state object for (pool, backend id) across reloads. Holds weak references only: a
// state lives while some snapshot uses it. Loop thread only.
class BackendRegistry {
 public:
  std::shared_ptr<BackendState> get_or_create(const std::string& pool, const std::string& id,
                                              const sockaddr_storage& addr,
                                              const std::string& addr_text);
  void prune() noexcept;  // forgets expired entries

 private:
  std::map<std::string, std::weak_ptr<BackendState>> states_;
};

}  // namespace rondel::proxy
