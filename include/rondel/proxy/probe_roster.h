// ProbeRoster: the probes of one periodic checker (HealthChecker, AgentChecker), one per backend
// that wants one, kept across snapshots by the backend's state (which a reload keeps). A sync
// marks every probe unseen (begin), finds or adds each wanted backend's probe, then stops and
// drops the probes no snapshot backend wanted (sweep). Loop thread only.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "rondel/core/hash.h"
#include "rondel/proxy/backend_state.h"

namespace rondel::proxy {

// P: a probe with public `seen_` (bool), `state_` (shared_ptr<BackendState>) and `stop()`,
// which frees it once its handles are closed.
template <class P>
class ProbeRoster {
 public:
  explicit ProbeRoster(uint64_t seed) noexcept : seed_(seed) {}

  // Starts a sync: every probe unseen, and indexed by its backend.
  void begin() {
    by_state_.clear();
    by_state_.reserve(probes_.size());
    for (P* p : probes_) {
      p->seen_ = false;
      by_state_.emplace(p->state_.get(), p);
    }
  }
  // The probe of `b` from before this sync, marked seen; nullptr when it has none.
  P* keep(const BackendState& b) noexcept {
    auto it = by_state_.find(&b);
    if (it == by_state_.end()) return nullptr;
    it->second->seen_ = true;
    return it->second;
  }
  // Whether `b` had a probe before this sync (without keeping it).
  bool had(const BackendState& b) const noexcept { return by_state_.contains(&b); }
  // The first check of a new probe: within min(interval, 1 s), spread so that a pool's backends
  // are not all probed in the same loop iteration. `salt`: the backend's index.
  uint64_t first_delay(uint64_t interval_ms, uint64_t now_ms, size_t salt) noexcept {
    seed_ = core::mix64(seed_, now_ms + salt);
    const uint64_t spread = std::min<uint64_t>(interval_ms, 1000);
    return spread > 1 ? seed_ % spread : 0;
  }
  void add(P* p) {
    p->seen_ = true;
    probes_.push_back(p);
  }
  // Ends a sync: the probes not kept or added are stopped and dropped.
  void sweep() {
    by_state_.clear();
    std::erase_if(probes_, [](P* p) {
      if (p->seen_) return false;
      p->stop();
      return true;
    });
  }
  // Stops and drops every probe.
  void stop_all() noexcept {
    for (P* p : probes_) p->stop();
    probes_.clear();
  }
  size_t size() const noexcept { return probes_.size(); }

 private:
  std::vector<P*> probes_;  // owned; each deletes itself once its handles are closed
  std::unordered_map<const BackendState*, P*> by_state_;  // during a sync
  uint64_t seed_;
};

}  // namespace rondel::proxy
