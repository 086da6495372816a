// PassiveHealth: the one owner of passive ejection (failures seen on real traffic), of the
// restore after the cool-down and of the pool's max_ejected_percent limit.
//
// It sets and clears only HealthFlag::kPassiveEjected; the active checker owns
// kFailedActiveCheck. The pool's unusable count follows the flags (BackendState::set_flag_within
// and clear_flag), so the limit is one compare-and-swap on that count: two workers ejecting at
// once cannot pass it together. Stateless: the state is in BackendState and PoolState.
#pragma once

#include <cstdint>

#include "rondel/core/backend_set.h"
#include "rondel/proxy/backend_state.h"
#include "rondel/proxy/log.h"

namespace rondel::proxy {

class Pool;

class PassiveHealth {
 public:
  // What a failure did to the backend.
  enum class Verdict : uint8_t {
    kCounted,         // one more failure in the run; still in rotation
    kEjected,         // this failure crossed the threshold and ejected the backend
    kAlreadyEjected,  // it was ejected already (by another worker, or on an older attempt)
    kLimitReached,    // crossed the threshold, but the pool is at max_ejected_percent
  };

  // An attempt on backend `i` of `pool` failed: connect failure, I/O error, timeout or a 5xx
  // response head. Counts the failure; when the run reaches passive.consecutive_failures (0 =
  // off), ejects the backend for passive.ejection_ms from `now_ms` unless the pool is at its
  // limit, and logs `warn backend_ejected` to `log`. Any worker thread; lock-free; allocates only
  // for the log line of an ejection. Precondition: i < pool.size().
  static Verdict note_failure(const Pool& pool, core::BackendIndex i, uint64_t now_ms,
                              Logger& log) noexcept;
  // A response head below 500 from `b`: the failure run starts over. Any thread; one relaxed
  // load, and a store only when a run was under way.
  static void note_success(BackendState& b) noexcept;

  // Daemon tick (the loop thread that owns slow start): every backend of `pool` whose ejection
  // has ended is back in rotation on probation (threshold - 1 failures kept, so one more ejects
  // it again; one success clears them), with slow start from `now_ms`, and `info
  // backend_restored` is logged. Returns how many came back. O(backends).
  static uint32_t restore_due(const Pool& pool, uint64_t now_ms, Logger& log) noexcept;

  // Backends of `pool` that may be unusable at once (any source) for an ejection to go ahead:
  // size * max_ejected_percent / 100, rounded down.
  static uint32_t limit(const Pool& pool) noexcept;
};

}  // namespace rondel::proxy
