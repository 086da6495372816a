// FleetLoad: the members of a fleet share their in-flight counts (`fleet: {peers | kubernetes,
// share_load: INTERVAL}`, issue 37). Every interval this instance GETs every other member's
// /api/fleet/load (that member's own in-flight counts per pool and backend, load_json) and, on
// each answer, writes into each backend of the served snapshot the sum of the other members'
// last counts and until when every one of them is fresh (BackendState::peer_in_flight,
// peer_fresh_until_ms). A member's answer is fresh for kFreshIntervals intervals after it
// arrived. While every member's is, the bound compares this instance's count plus theirs, one
// for one (core::effective_load): the fleet bounds by its own counts, at most a few intervals
// old, instead of a backend's last report or N times what this instance sees
// (docs/routing.md, "Fleets: shared counts").
//
// A member that does not answer (stopped, slow, another instance at its address) stops being
// fresh, and every backend falls back to the report or N x local until it answers again: losing
// a peer costs the shared counts, never routing. Loop thread only; never throws.
#pragma once

#include <uv.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "fleet.h"
#include "rondel/proxy/snapshot.h"
#include "rondel/util/json_writer.h"

namespace rondel::server {

class ApiCall;

class FleetLoad {
 public:
  // A member's counts count this many intervals after they arrived: one late answer (a poll
  // skipped while the last is still in flight) does not drop the fleet to the fallback.
  static constexpr uint64_t kFreshIntervals = 4;
  static constexpr size_t kMaxAnswer = 1 << 20;  // a larger answer is cut (and rejected)

  // Starts at once. `snapshot` returns the snapshot being served; `fleet` must outlive this.
  FleetLoad(uv_loop_t* loop, Fleet& fleet, uint64_t interval_ms,
            std::function<std::shared_ptr<const proxy::Snapshot>()> snapshot);
  ~FleetLoad();  // stop()s
  FleetLoad(const FleetLoad&) = delete;
  FleetLoad& operator=(const FleetLoad&) = delete;
  // Stops polling, cancels the calls in flight and marks every backend's shared counts stale.
  // Idempotent.
  void stop() noexcept;

  // This instance's own counts, what /api/fleet/load serves: {"id": ID, "pools": {POOL:
  // {BACKEND_ID: COUNT}}}, COUNT the backend's in-flight requests (their cost with `load_by:
  // prompt_size`, what the pool's bound compares).
  static std::string load_json(const std::string& id, const proxy::Snapshot& snap);
  // "load": {"interval_ms", "fresh": every member's counts fresh, "members": {ID: {"answered":
  // bool, "age_ms": since its last answer or null}}} for /api/fleet.
  void write_json(util::JsonWriter& w) const;

 private:
  struct Sample {
    uint64_t at_ms = 0;  // loop time it arrived; 0: never
    std::map<std::string, std::map<std::string, uint32_t>> pools;  // pool -> backend id -> count
  };
  static void on_timer(uv_timer_t* t) noexcept;
  void poll();
  // Writes the sums and their freshness into the served snapshot's backends.
  void apply();
  uint64_t fresh_ms() const noexcept { return kFreshIntervals * interval_ms_; }

  uv_loop_t* loop_;
  Fleet& fleet_;
  uint64_t interval_ms_;
  std::function<std::shared_ptr<const proxy::Snapshot>()> snapshot_;
  uv_timer_t* timer_ = nullptr;  // heap: freed by its close callback
  std::map<std::string, Sample> samples_;      // by member id
  std::map<std::string, ApiCall*> calls_;      // polls in flight, by member id
};

}  // namespace rondel::server
