// Event-driven bounded-load replay: Poisson arrivals with Zipf keys, exponential service times.
#pragma once

#include <cstdint>

#include "options.h"
#include "rondel/core/result.h"

namespace rondel::sim {

// ReplayReport holds every figure of one replay. "At arrivals" figures are sampled right after
// each request (past the warm-up) is placed; in-flight counts are normalized by weight share.
struct ReplayReport {
  uint64_t requests = 0;
  uint64_t measured = 0;              // Requests past the warm-up (first 5 mean service times).
  double offered_in_flight = 0.0;     // arrival_rate * mean_service (Little's law).
  double mean_in_flight = 0.0;        // Time-averaged total in flight over the whole replay.
  double peak_max_over_avg = 0.0;     // At arrivals: max over arrivals of max_i load_i / mean.
  double mean_max_over_avg = 0.0;     // At arrivals: mean over arrivals of the same ratio.
  double max_cap_ratio = 0.0;         // Max over picks of in_flight_after / capacity.
  uint64_t cap_violations = 0;        // Picks above capacity while some backend had room.
  uint64_t false_all_full = 0;        // Picks reporting all_full while some backend had room.
  uint64_t order_violations = 0;      // Clockwise probe: chosen backend is not the first with room.
  uint64_t capacity_mismatches = 0;   // PickResult::capacity differs from capacity().
  uint64_t all_full = 0;
  double spill_share = 0.0;           // Share of requests not served by their natural owner.
  double mean_hops = 0.0;             // Backends skipped (full) before the one chosen.
  uint32_t max_hops = 0;
  double spill_to_successor = 0.0;    // Share of spilled requests landing on preference[1].
  double spill_max_over_avg = 0.0;    // Max over backends of spill received / mean received.
  double wall_seconds = 0.0;
};

// Runs the replay for `opt` (opt.replay is ignored; opt.algo must not be jump). Deterministic
// for a given opt.seed. Cost: O(requests * (log requests + pick cost)).
core::Result<ReplayReport> run_replay(const SimOptions& opt);

}  // namespace rondel::sim
