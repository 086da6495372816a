// A backend's live state: in-flight count, health flags, counters and its idle connections.
//
// BackendState outlives configuration snapshots: a reload that keeps a backend id keeps the same
// object, so its in-flight count, health and pooled connections carry over. It is shared by the
// snapshots that name it (shared_ptr) and found again by BackendRegistry on the next reload.
//
// Threads: in-flight, health flags, counters and open_connections are atomics shared by every
// worker (so the bounded-load cap is global). Idle connections are libuv handles bound to one
// loop, so each worker has its own idle list, indexed by the worker's id; only that worker
// touches it.
#pragma once

#include <sys/socket.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "rondel/proxy/agent_answer.h"
#include "rondel/proxy/load_report.h"
#include "rondel/util/intrusive_list.h"

namespace rondel::proxy {

class BackendConn;
struct BackendIdleTag;

// Why a backend is out of rotation: one bit per source, each set and cleared only by its owner
// (Envoy's HealthFlag). A backend is usable when no bit is set.
enum class HealthFlag : uint8_t {
  kFailedActiveCheck = 1u << 0,  // `fall` active checks failed in a row (HealthChecker)
  kPassiveEjected = 1u << 1,     // failures on real traffic ejected it (PassiveHealth)
  kAdminDown = 1u << 2,          // an operator set drain or maint (BackendState::set_admin_state)
  // The backend's agent (agent_check, AgentChecker) said `down` / `fail` / `stopped`, until it
  // says `up`.
  kAgentDown = 1u << 3,
  // The backend's agent said `drain` or `maint`, until it says `ready`. Apart from kAdminDown:
  // the operator's state and the agent's are two reasons, and the backend is out while either
  // holds (HAProxy keeps the CLI's and the agent's drain apart the same way).
  kAgentAdmin = 1u << 4,
};

// What an operator set through the admin API (PUT /api/pools/{pool}/backends/{id}).
// kDrain and kMaint both take the backend out of rotation (kAdminDown): no new request goes
// there, requests in flight finish, and its keys go to the next backend in their preference
// order. kMaint also pauses its active health checks (the backend may be stopped on purpose).
enum class AdminState : uint8_t { kReady, kDrain, kMaint };

// The views' summary of the flags (metrics `state` label, admin JSON): kDown when the active
// check failed or the agent said down, else kEjected when passively ejected, else kUp.
enum class Health : uint8_t { kUp, kDown, kEjected };

// What set_flag_within did.
enum class FlagChange : uint8_t {
  kSet,           // the flag was clear and is now set
  kAlreadySet,    // the flag was already set: nothing changed
  kLimitReached,  // the pool already has `limit` unusable backends: the flag was not set
};

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
  // `pool_unusable` is the pool's count of unusable backends (PoolState::unusable, kept alive by
  // the pointer); null when the state belongs to no pool (tests). This state keeps it: +1 while
  // any health flag is set, and -1 when it is destroyed with a flag set.
  BackendState(std::string pool, std::string id, const sockaddr_storage& addr,
               std::string addr_text,
               std::shared_ptr<std::atomic<uint32_t>> pool_unusable = nullptr);
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
  // With `load_by: prompt_size`: the body KiB of those requests (each at least 1), what the bound
  // compares instead. Raised and lowered only by their InFlightSlots.
  std::atomic<uint32_t> in_flight_cost{0};
  BackendCounters counters;
  // The backend's own load reports (pool config load_report; proxy/load_report.h), read
  // against in_flight.
  LoadReportState report{in_flight};
  // The fleet's other members' in-flight counts (or costs, `load_by: prompt_size`) of this
  // backend, summed as they last shared them, and until when (monotonic ms) every member's
  // share is fresh; 0: not shared. Written by the loop's FleetLoad (fleet.share_load,
  // server/fleet_load.h) only, read by every pick (proxy/load_report.h).
  std::atomic<uint32_t> peer_in_flight{0};
  std::atomic<uint64_t> peer_fresh_until_ms{0};
  // What its agent last said (agent_check; AgentChecker writes, kept across reloads).
  AgentState agent;

  // Health flags (any thread). usable() is one acquire load: true when no flag is set; a
  // thread that sees a flag set also sees what its owner stored before setting it (e.g.
  // ejected_until_ms).
  bool usable() const noexcept { return flags_.load(std::memory_order_acquire) == 0; }
  bool has_flag(HealthFlag f) const noexcept {
    return (flags_.load(std::memory_order_acquire) & static_cast<uint8_t>(f)) != 0;
  }
  Health health() const noexcept;
  // Sets flag `f`; returns true when it was clear. The pool's unusable count goes up first and
  // back down when another flag was already set, so the count is never below the number of
  // flagged backends (a pick that reads 0 may skip the scan for unusable ones). Lock-free.
  bool set_flag(HealthFlag f) noexcept;
  // As set_flag, but only while the pool's unusable count is below `limit` (checked and
  // reserved in one compare-and-swap, so racing callers cannot pass the limit together). A
  // backend already unusable for another source gets `f` whatever the count.
  FlagChange set_flag_within(HealthFlag f, uint32_t limit) noexcept;
  // Clears flag `f`; returns true when it was set. The pool's count goes down when no flag is
  // left.
  bool clear_flag(HealthFlag f) noexcept;

  // The operator's state (any thread reads; only the daemon's loop writes, through
  // set_admin_state, which also sets or clears kAdminDown). Returns true when it changed.
  AdminState admin_state() const noexcept { return admin_state_.load(std::memory_order_acquire); }
  bool set_admin_state(AdminState s) noexcept;

  // Passive health bookkeeping, written only by PassiveHealth: failures in a row seen on real
  // traffic (connect failures, I/O errors, timeouts, 5xx heads), and the loop time (ms) at which
  // the current ejection ends (stored before kPassiveEjected is set).
  uint32_t consecutive_failures() const noexcept {
    return consecutive_failures_.load(std::memory_order_relaxed);
  }
  uint64_t ejected_until_ms() const noexcept {
    return ejected_until_ms_.load(std::memory_order_relaxed);
  }

  // Slow start (loop thread): loop time (ms) at which the backend came up, was added or
  // recovered; 0 = not ramping. Pool::refresh_weights turns it into an effective weight.
  uint64_t ramp_start_ms = 0;
  // Active health checks (loop thread, HealthChecker only): results in a row, kept across
  // reloads.
  uint32_t check_successes = 0;
  uint32_t check_failures = 0;
  // Connect failures already acted on by DNS discovery (compared with counters.connect_errors).
  uint64_t connect_errors_seen = 0;

  // Idle keep-alive connections of worker `w` (that worker's loop thread only). pop_idle
  // returns nullptr when empty. remove_idle finds the list through the connection's worker.
  BackendConn* pop_idle(uint32_t w) noexcept;
  // The most recently pooled idle connection of worker `w` whose reuse_key() is `key` (0: no
  // PROXY header; otherwise the header binds the connection to one client), removed from the
  // list; nullptr if none. Walks at most the worker's idle list (max_idle_per_backend).
  BackendConn* pop_idle_matching(uint32_t w, uint64_t key) noexcept;
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
  friend class PassiveHealth;
  std::string pool_, id_;
  sockaddr_storage addr_;
  std::string addr_text_;
  // Moves the pool's count by `delta` (when there is one).
  void count_unusable(int delta) noexcept;
  std::atomic<uint8_t> flags_{0};  // HealthFlag bits
  std::atomic<AdminState> admin_state_{AdminState::kReady};
  std::atomic<uint32_t> consecutive_failures_{0};
  std::atomic<uint64_t> ejected_until_ms_{0};
  std::shared_ptr<std::atomic<uint32_t>> pool_unusable_;
  struct alignas(64) IdleList {  // one cache line per worker: no false sharing
    util::IntrusiveList<BackendConn, BackendIdleTag> list;  // most recent first
    uint32_t count = 0;
  };
  std::array<IdleList, kMaxWorkers> idle_{};
  std::atomic<uint32_t> idle_total_{0};
};

// Finds the state object for (pool, backend id) across reloads. Holds weak references only: a
// state lives while some snapshot uses it. Loop thread only.
class BackendRegistry {
 public:
  // `pool_unusable` is handed to a state created here (see BackendState); a state found again
  // keeps the count it was created with (one per pool name: PoolState lives as long as the
  // daemon).
  std::shared_ptr<BackendState> get_or_create(
      const std::string& pool, const std::string& id, const sockaddr_storage& addr,
      const std::string& addr_text,
      std::shared_ptr<std::atomic<uint32_t>> pool_unusable = nullptr);
  void prune() noexcept;  // forgets expired entries

 private:
  std::map<std::string, std::weak_ptr<BackendState>> states_;
};

}  // namespace rondel::proxy
