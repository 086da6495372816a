// Fleet replay: L rondel instances in front of the same backends, each with its own in-flight
// counts, with and without backend-reported load (core/reported_load.h, docs/routing.md
// "Fleets: backend-reported load").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "options.h"
#include "rondel/core/result.h"

namespace rondel::sim {

// The figures of one fleet run, over the requests after the warm-up.
struct FleetReport {
  bool reports = false;
  uint64_t measured = 0;
  double max_over_mean = 0.0;       // mean at arrivals of max_i in_flight_i / mean (global)
  double max_over_mean_peak = 0.0;
  double max_over_cap = 0.0;        // mean at arrivals of max_i in_flight_i / pool cap(total)
  // Mean at arrivals of sum_i max(0, in_flight_i - pool cap(total)) / total: the share of the
  // requests in flight that would have to be elsewhere for every backend to be within the cap.
  double over_cap_share = 0.0;
  double spill = 0.0;               // share of requests served away from the key's owner
  double miss_rate = 0.0;
  uint64_t stale_reads = 0;         // backend loads read as the local count: report too old
  uint64_t fresh_reads = 0;         // backend loads read from a fresh report
  double mean_report_age = 0.0;     // mean age of the fresh reports read, time units
  double reports_per_backend = 0.0; // reports an instance gets per backend per time unit
};

// Runs the closed-loop fleet model (--clients K split over instances by --fleet-split shares,
// each client's requests through its own instance): with `reports`, each response tells the
// instance that sent it the backend's true in-flight count (this request excluded) and the pick
// compares effective loads; without, each instance bounds by its own counts. Equal weights.
core::Result<FleetReport> run_fleet(const SimOptions& opt, bool reports);

// How often the instances of a fleet agree on the hot keys' replica counts (issue 37, part 3).
struct HotAgreementReport {
  uint64_t checks = 0;         // comparisons made (every window/4 after two windows)
  uint64_t keys_compared = 0;  // (check, key) pairs: keys hot on at least one instance
  uint64_t keys_agreed = 0;    // ... on which every instance had the same R
  uint64_t checks_agreed = 0;  // checks on which every key agreed
  // The same pairs weighed by each key's share of the requests: the hot-key traffic whose R
  // every instance agreed on.
  double share_compared = 0.0;
  double share_agreed = 0.0;
};

// --hot-agreement: --requests keys (Zipf --zipf over --keys) arrive at --arrival-rate per
// second, each at an instance drawn by the --fleet-split shares; every instance runs its own
// core::RoutePolicy (--hot-share, --hot-window in ms, --hot-capacity, --min-count) over
// --backends eligible backends, scaled by `scale` detectors (1: unaware of the fleet, the
// shipped behaviour before issue 37; the fleet's size: counts scaled and R quantized).
core::Result<HotAgreementReport> run_hot_agreement(const SimOptions& opt, uint32_t scale);

}  // namespace rondel::sim
