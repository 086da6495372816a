// PassiveHealth: ejection on real-traffic failures, restore after the cool-down, the limit.
#include "rondel/proxy/passive_health.h"

#include <string>

#include "rondel/proxy/pool.h"

namespace rondel::proxy {

uint32_t PassiveHealth::limit(const Pool& pool) noexcept {
  return static_cast<uint32_t>(uint64_t{pool.size()} * pool.config().passive.max_ejected_percent /
                               100);
}

PassiveHealth::Verdict PassiveHealth::note_failure(const Pool& pool, core::BackendIndex i,
                                                   uint64_t now_ms, Logger& log) noexcept {
  BackendState& b = pool.backend(i);
  const config::PassiveHealthConfig& pc = pool.config().passive;
  const uint32_t run = b.consecutive_failures_.fetch_add(1, std::memory_order_relaxed) + 1;
  if (pc.consecutive_failures == 0 || run < pc.consecutive_failures) return Verdict::kCounted;
  if (b.has_flag(HealthFlag::kPassiveEjected)) return Verdict::kAlreadyEjected;
  // Stored before the flag (whose set is a release): whoever sees the flag sees this deadline.
  // A racing ejector stores a deadline as good as this one.
  b.ejected_until_ms_.store(now_ms + pc.ejection_ms, std::memory_order_relaxed);
  switch (b.set_flag_within(HealthFlag::kPassiveEjected, limit(pool))) {
    case FlagChange::kAlreadySet:
      return Verdict::kAlreadyEjected;
    case FlagChange::kLimitReached:
      if (log.enabled(Level::kDebug)) {
        log.log(Level::kDebug, "ejection_limited",
                "pool=" + pool.name() + " backend=" + b.id() + " failures=" + std::to_string(run));
      }
      return Verdict::kLimitReached;
    case FlagChange::kSet:
      break;
  }
  if (log.enabled(Level::kWarn)) {
    log.log(Level::kWarn, "backend_ejected",
            "pool=" + pool.name() + " backend=" + b.id() + " failures=" + std::to_string(run));
  }
  return Verdict::kEjected;
}

void PassiveHealth::note_success(BackendState& b) noexcept {
  if (b.consecutive_failures_.load(std::memory_order_relaxed) != 0) {
    b.consecutive_failures_.store(0, std::memory_order_relaxed);
  }
}

uint32_t PassiveHealth::restore_due(const Pool& pool, uint64_t now_ms, Logger& log) noexcept {
  const uint32_t threshold = pool.config().passive.consecutive_failures;
  uint32_t restored = 0;
  for (size_t i = 0; i < pool.size(); ++i) {
    BackendState& b = pool.backend(static_cast<core::BackendIndex>(i));
    // has_flag is an acquire load: the deadline read next is the one stored before the flag.
    if (!b.has_flag(HealthFlag::kPassiveEjected) || b.ejected_until_ms() > now_ms) continue;
    // Probation first, then back in rotation: one more failure ejects it again.
    b.consecutive_failures_.store(threshold > 0 ? threshold - 1 : 0, std::memory_order_relaxed);
    if (!b.clear_flag(HealthFlag::kPassiveEjected)) continue;
    b.ramp_start_ms = now_ms;
    ++restored;
    log.log(Level::kInfo, "backend_restored", "pool=" + pool.name() + " backend=" + b.id());
  }
  return restored;
}

}  // namespace rondel::proxy
