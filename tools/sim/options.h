// Command-line options of rondel-sim and their parser.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rondel/core/bounded.h"
#include "rondel/core/result.h"
#include "rondel/core/selector.h"

namespace rondel::sim {

// AlgoChoice is the placement under test: one of the Selector algorithms, or jump hash (which
// has no Selector and takes numbered buckets only).
enum class AlgoChoice : uint8_t { kRing, kRendezvous, kMaglev, kJump, kSkeletonRendezvous };

// SimOptions holds every knob of one simulator run; defaults are the documented ones.
struct SimOptions {
  AlgoChoice algo = AlgoChoice::kRing;
  uint32_t backends = 10;
  std::vector<uint32_t> weights;   // Empty: every weight is 1.
  uint32_t points = 160;           // Ring points per unit of weight.
  uint32_t maglev_table = 65537;   // Maglev lookup-table size (prime).
  uint64_t keys = 100000;
  double zipf = 0.0;               // 0: every key is requested equally often.
  uint64_t seed = 1;
  uint32_t churn_trials = 5;       // Add/remove experiments averaged for the movement figures.
  uint32_t lookup_reps = 5;        // Repetitions of the lookup timing (median reported).
  bool json = false;
  bool check = false;
  std::vector<AlgoChoice> versus;  // --versus a,b: interleaved lookup timing against --algo

  // --to-*: measure the keys moved by one configuration change (transition.h).
  bool transition = false;
  AlgoChoice to_algo = AlgoChoice::kRing;  // --to-algo (default: --algo)
  uint32_t to_backends = 0;                // --to-backends N (0: --backends)
  std::vector<uint32_t> to_weights;        // --to-weights (empty: --weights, then 1)
  int64_t to_rename = -1;                  // --to-rename G: backend G gets a new id

  bool replay = false;
  uint32_t balance_factor = 125;   // Percent; 0 means unbounded (always the natural owner).
  core::ProbeOrder probe = core::ProbeOrder::kClockwise;
  uint64_t requests = 1000000;
  double arrival_rate = 1000.0;    // Requests per unit of time.
  double mean_service = 1.0;       // Mean service time, same unit.

  // --routing: routing-policy replay with a cache model (routing.h, docs/routing.md).
  bool routing = false;
  std::vector<std::string> policies;  // --policy a,b,...; empty: rondel
  std::vector<uint32_t> sweep;        // --sweep 110,125,...: balance factors; empty: --balance-factor
  uint32_t clients = 0;               // --clients K: closed loop of K clients; 0: Poisson arrivals
  uint64_t cache_objects = 0;         // --cache-objects C: LRU objects per backend; 0: no cache
  double miss_delay = 0.0;            // --miss-delay D: extra service time of a cache miss
  uint64_t warmup_requests = 0;       // --warmup R: requests not measured; 0: requests / 5
  uint32_t slack = 0;                 // --slack S (rondel policy)
  uint32_t hysteresis = 0;            // --hysteresis H (rondel policy)
  uint32_t spill_memory = 0;          // --spill-memory N entries (rondel policy); 0: off
  uint32_t hot_share = 0;             // --hot-share PCT (rondel policy); 0: no replicas
  uint32_t max_replicas = 0;          // --max-replicas R; 0: all eligible backends
  core::ReplicaChoice replica_choice = core::ReplicaChoice::kLeastLoaded;  // --replica-choice
  double hot_window = 1000.0;         // --hot-window T: hot-key detector window, time units
  uint32_t hot_capacity = 64;         // --hot-capacity K: space-saving counters per window
  uint32_t haproxy_points = 16;       // --haproxy-points: ring points of the haproxy policy
  uint32_t nginx_points = 160;        // --nginx-points: ring points of the nginx policy
  double check_max_spill = -1;        // --check-max-spill X: --check fails above it (< 0: off)
  double check_max_miss = -1;         // --check-max-miss X
  double check_max_ratio = 0;         // --check-max-ratio X: requests max/avg (0: off)

  // --fleet: L instances with and without backend-reported load (fleet.h).
  bool fleet = false;
  std::vector<uint32_t> fleet_split = {60, 30, 10};  // --fleet-split: clients per instance, %
  double report_age = 2.0;            // --report-age A: a report's max age, time units
  // --fleet-n N: the fleet size each instance scales its view by (core::effective_load's
  // `instances`): 1 = unaware (the per-instance bound), 0 = the true number of instances.
  uint32_t fleet_n = 1;
  bool hot_agreement = false;         // --hot-agreement: see fleet.h
  uint64_t min_count = 16;            // --min-count C: hot-key detector's min_count
  uint32_t min_reports = 1;           // --min-reports K: reports within the max age a report
                                      // needs to be used (the daemon's load_report.min_reports;
                                      // 1 here so the earlier tables replay)
  double report_poll = 0.0;           // --report-poll P: every instance polls every backend
                                      // each P time units too (0: reports on responses only)
  // --report-rounding up: a fresh report's last places are all taken (the ceiling, the
  // daemon's rule before core::room_admits); random (the default, the daemon's): room_admits.
  bool report_round_up = false;
  // --peer-share P: the second run ("reports") shares counts instead (the daemon's
  // fleet.share_load): each instance reads every other instance's own in-flight counts every
  // P time units (the instances staggered by P / L), and bounds by its own counts plus the
  // others' last ones (core::effective_load with peers_fresh: no report, no scaling by N).
  double peer_share = 0.0;
};

// Returns the usage text printed by --help and on a parse error.
std::string usage();

// Parses argv into SimOptions. Returns an Error naming the bad flag or value; `--help` yields an
// Error whose message is empty (the caller prints usage and exits 0).
core::Result<SimOptions> parse_options(int argc, char** argv);

// Returns the printable name of an algorithm choice ("ring", "rendezvous", ...).
const char* algo_name(AlgoChoice algo) noexcept;
// The Selector algorithm of a choice other than kJump (which has none).
core::Algorithm selector_algorithm(AlgoChoice algo) noexcept;

}  // namespace rondel::sim
