// Routing-policy replay with a cache model: each backend an LRU of C objects, a miss adds D to
// the service time; compares HAProxy-like, nginx-like, plain bounded and rondel routing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "options.h"
#include "rondel/core/result.h"

namespace rondel::sim {

// RoutingReport holds the figures of one (policy, balance factor) run, over the requests after
// the warm-up. "Home" is the backend a request would get if no backend were full (the owner).
struct RoutingReport {
  std::string policy;
  uint32_t balance_factor = 0;
  uint64_t measured = 0;
  double req_max_over_avg = 0.0;       // max_i requests_i / mean (per unit of weight)
  double inflight_mean_max_over_avg = 0.0;  // at arrivals, mean of max_i in_flight_i / mean
  double inflight_peak_max_over_avg = 0.0;
  double max_cap_ratio = 0.0;          // max over picks of in_flight_after / cap (bounded only)
  uint64_t cap_violations = 0;         // picks leaving a backend above its cap while one had room
  double spill = 0.0;                  // share of requests served away from home
  double spill_overflow = 0.0;         // ... because home (or all replicas) was full
  double spill_sticky = 0.0;           // ... on a remembered spill target (rondel)
  double spill_replica = 0.0;          // ... on a replica of a hot key (rondel)
  double miss_rate = 0.0;              // origin fetches / requests
  std::vector<uint64_t> requests_per_backend;
  std::vector<uint64_t> misses_per_backend;
  double keys_multi = 0.0;             // share of requested keys served by > 1 backend
  double requests_multi = 0.0;         // share of requests whose key was served by > 1 backend
  double visits_mean = 0.0;            // mean distinct backends per requested key
  std::vector<double> keys_by_visits;  // share of requested keys served by 1, 2, ... backends
  uint64_t hot_keys = 0;               // keys with R > 1 in the final hot table (rondel)
  double wall_seconds = 0.0;
};

// Policy names accepted by --policy: "haproxy", "nginx", "bounded", "rondel".
bool valid_policy(const std::string& name);

// Runs one replay of `policy` at `balance_factor` (0 = unbounded). Deterministic for a seed.
core::Result<RoutingReport> run_routing(const SimOptions& opt, const std::string& policy,
                                        uint32_t balance_factor);

}  // namespace rondel::sim
