// Parses rondel-sim's command line into SimOptions, rejecting unknown flags and bad values.
#include "options.h"

#include <charconv>
#include <cstdlib>
#include <random>
#include <string_view>

#include "rondel/core/reported_load.h"
#include "routing.h"

namespace rondel::sim {
namespace {

// Parses an unsigned integer in [lo, hi]; returns false on junk or out-of-range input.
bool parse_u64(std::string_view text, uint64_t lo, uint64_t hi, uint64_t& out) {
  uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size() || v < lo || v > hi) return false;
  out = v;
  return true;
}

// Parses a finite double >= lo; returns false on junk.
bool parse_double(std::string_view text, double lo, double& out) {
  std::string s(text);
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !(v >= lo) || v > 1e18) return false;
  out = v;
  return true;
}

// Parses "1,2,1" into weights in [1, 65535].
bool parse_weights(std::string_view text, std::vector<uint32_t>& out) {
  out.clear();
  while (!text.empty()) {
    size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    uint64_t w = 0;
    if (!parse_u64(item, 1, 65535, w)) return false;
    out.push_back(static_cast<uint32_t>(w));
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return !out.empty();
}

// Parses "a,b,c" into its non-empty items.
std::vector<std::string> split(std::string_view text) {
  std::vector<std::string> out;
  while (!text.empty()) {
    size_t comma = text.find(',');
    if (comma != 0) out.emplace_back(text.substr(0, comma));
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return out;
}

// Sets `out` from an algorithm name; false if it names none.
bool parse_algo(std::string_view v, AlgoChoice& out) {
  for (AlgoChoice a : {AlgoChoice::kRing, AlgoChoice::kRendezvous, AlgoChoice::kMaglev,
                       AlgoChoice::kJump, AlgoChoice::kSkeletonRendezvous}) {
    if (v == algo_name(a)) {
      out = a;
      return true;
    }
  }
  return false;
}

}  // namespace

std::string usage() {
  return "usage: rondel-sim --algo ring|rendezvous|skeleton_rendezvous|maglev|jump --backends N\n"
         "         [--weights 1,2,1,...|--weights-random SEED] [--points K] [--maglev-table P]\n"
         "         [--keys M] [--zipf S] [--seed X] [--churn-trials T] [--lookup-reps R]\n"
         "         [--json] [--check] [--versus ALGO,ALGO,...]\n"
         "       rondel-sim ... [--to-algo A] [--to-backends N] [--to-weights 1,2,...]\n"
         "         [--to-rename G]   (share of keys whose owner one change would move)\n"
         "       rondel-sim ... --replay [--balance-factor C] [--probe clockwise|random]\n"
         "         [--requests R] [--arrival-rate L] [--mean-service T]\n"
         "       rondel-sim ... --routing [--policy haproxy,nginx,bounded,rondel]\n"
         "         [--sweep 110,125,150,200] [--clients K] [--cache-objects C]\n"
         "         [--miss-delay D] [--warmup R] [--slack S] [--hysteresis H]\n"
         "         [--spill-memory N] [--hot-share PCT] [--max-replicas R]\n"
         "         [--replica-choice least|rr] [--hot-window T] [--hot-capacity K]\n"
         "         [--haproxy-points P] [--nginx-points P]\n"
         "         [--check-max-spill X] [--check-max-miss X] [--check-max-ratio X]\n"
         "\n"
         "Measures key balance, movement on churn, memory, build and lookup time of one\n"
         "placement algorithm; with --replay, runs an event-driven bounded-load replay instead;\n"
         "with --fleet (--clients K, --fleet-split 60,30,10, --report-age A, --min-reports K, --report-poll P,\n"
         "--report-rounding up|random,\n"
         "--slack S, --fleet-n N: 1 = instances unaware of the fleet, 0 = they know its size),\n"
         "runs K closed-loop clients through L instances, without then with backend-reported\n"
         "load (with --peer-share P instead of reports: each instance reads the others' own\n"
         "counts every P time units, fleet.share_load)\n"
         "with --hot-agreement (--fleet-split, --hot-share, --hot-window ms, --arrival-rate per\n"
         "second, --min-count C), how often instances agree on hot keys' replica counts,\n"
         "unaware of the fleet then scaled by its size\n"
         "with --routing, replays routing policies against per-backend LRU caches (one line per\n"
         "policy and balance factor; --json: one JSON object per line).\n"
         "  --points K          ring and skeleton points per unit of weight (default 160)\n"
         "  --weights-random S  weights drawn uniformly from 1..4 with seed S\n"
         "  --zipf S            key popularity ~ 1/rank^S (0: uniform; default 0)\n"
         "  --churn-trials T    add/remove experiments averaged (default 5)\n"
         "  --versus A,B        also time A, B, ... on the same keys, interleaved rep by rep with\n"
         "                      --algo in one process (ratios are the robust figure)\n"
         "  --balance-factor C  percent, e.g. 125 = 1.25 x fair share; 0 = unbounded (default 125)\n"
         "  --check             exit 1 if a checked property fails (ring CV vs theory > 15%,\n"
         "                      ring/rendezvous/skeleton/jump movement vs ideal > 10%, keys\n"
         "                      moving between old backends, any cap violation in a replay)\n";
}

core::Algorithm selector_algorithm(AlgoChoice algo) noexcept {
  switch (algo) {
    case AlgoChoice::kRing: return core::Algorithm::kRing;
    case AlgoChoice::kRendezvous: return core::Algorithm::kRendezvous;
    case AlgoChoice::kSkeletonRendezvous: return core::Algorithm::kSkeletonRendezvous;
    case AlgoChoice::kMaglev:
    case AlgoChoice::kJump: break;
  }
  return core::Algorithm::kMaglev;
}

// The Selector algorithms by core's names (string literals, so .data() ends in a NUL).
const char* algo_name(AlgoChoice algo) noexcept {
  return algo == AlgoChoice::kJump ? "jump" : core::name_of(selector_algorithm(algo)).data();
}

core::Result<SimOptions> parse_options(int argc, char** argv) {
  SimOptions o;
  bool random_weights = false;
  bool to_algo_given = false;
  uint64_t weight_seed = 0;
  for (int i = 1; i < argc; ++i) {
    std::string_view flag = argv[i];
    if (flag == "--help" || flag == "-h") return core::fail("");
    if (flag == "--json") { o.json = true; continue; }
    if (flag == "--check") { o.check = true; continue; }
    if (flag == "--replay") { o.replay = true; continue; }
    if (flag == "--routing") { o.routing = true; continue; }
    if (flag == "--fleet") { o.fleet = true; continue; }
    if (flag == "--hot-agreement") { o.hot_agreement = true; continue; }
    if (i + 1 >= argc) return core::fail("missing value after " + std::string(flag));
    std::string_view v = argv[++i];
    uint64_t n = 0;
    bool ok = true;
    if (flag == "--algo") {
      ok = parse_algo(v, o.algo);
    } else if (flag == "--to-algo") {
      ok = parse_algo(v, o.to_algo);
      o.transition = to_algo_given = true;
    } else if (flag == "--to-backends") {
      ok = parse_u64(v, 1, 65534, n);
      o.to_backends = static_cast<uint32_t>(n);
      o.transition = true;
    } else if (flag == "--to-weights") {
      ok = parse_weights(v, o.to_weights);
      o.transition = true;
    } else if (flag == "--to-rename") {
      ok = parse_u64(v, 0, 65533, n);
      o.to_rename = static_cast<int64_t>(n);
      o.transition = true;
    } else if (flag == "--versus") {
      while (ok && !v.empty()) {
        const size_t comma = std::min(v.find(','), v.size());
        AlgoChoice a{};
        ok = parse_algo(v.substr(0, comma), a);
        o.versus.push_back(a);
        v.remove_prefix(std::min(comma + 1, v.size()));
      }
    } else if (flag == "--backends") {
      ok = parse_u64(v, 1, 65534, n);
      o.backends = static_cast<uint32_t>(n);
    } else if (flag == "--weights") {
      ok = parse_weights(v, o.weights);
    } else if (flag == "--weights-random") {
      ok = parse_u64(v, 0, UINT64_MAX, weight_seed);
      random_weights = true;
    } else if (flag == "--points") {
      ok = parse_u64(v, 1, 1u << 20, n);
      o.points = static_cast<uint32_t>(n);
    } else if (flag == "--maglev-table") {
      ok = parse_u64(v, 1, 1u << 24, n);
      o.maglev_table = static_cast<uint32_t>(n);
    } else if (flag == "--keys") {
      ok = parse_u64(v, 1, 1ull << 28, o.keys);
    } else if (flag == "--zipf") {
      ok = parse_double(v, 0.0, o.zipf);
    } else if (flag == "--seed") {
      ok = parse_u64(v, 0, UINT64_MAX, o.seed);
    } else if (flag == "--churn-trials") {
      ok = parse_u64(v, 0, 1000, n);
      o.churn_trials = static_cast<uint32_t>(n);
    } else if (flag == "--lookup-reps") {
      ok = parse_u64(v, 1, 1000, n);
      o.lookup_reps = static_cast<uint32_t>(n);
    } else if (flag == "--balance-factor") {
      ok = parse_u64(v, 0, 100000, n) && (n == 0 || n >= 100);
      o.balance_factor = static_cast<uint32_t>(n);
    } else if (flag == "--probe") {
      ok = false;
      for (size_t i = 0; i < std::size(core::kProbeOrderNames); ++i) {
        if (v != core::kProbeOrderNames[i]) continue;
        o.probe = static_cast<core::ProbeOrder>(i);
        ok = true;
      }
    } else if (flag == "--requests") {
      ok = parse_u64(v, 1, 1ull << 34, o.requests);
    } else if (flag == "--arrival-rate") {
      ok = parse_double(v, 1e-9, o.arrival_rate);
    } else if (flag == "--mean-service") {
      ok = parse_double(v, 1e-9, o.mean_service);
    } else if (flag == "--policy") {
      o.policies = split(v);
      ok = !o.policies.empty();
      for (const std::string& p : o.policies) ok = ok && valid_policy(p);
    } else if (flag == "--sweep") {
      o.sweep.clear();
      for (const std::string& item : split(v)) {
        ok = ok && parse_u64(item, 0, 100000, n) && (n == 0 || n >= 100);
        o.sweep.push_back(static_cast<uint32_t>(n));
      }
      ok = ok && !o.sweep.empty();
    } else if (flag == "--fleet-split") {
      o.fleet_split.clear();
      for (const std::string& item : split(v)) {
        ok = ok && parse_u64(item, 1, 100, n);
        o.fleet_split.push_back(static_cast<uint32_t>(n));
      }
      ok = ok && !o.fleet_split.empty();
    } else if (flag == "--report-age") {
      ok = parse_double(v, 0.0, o.report_age);
    } else if (flag == "--min-count") {
      ok = parse_u64(v, 0, 1u << 30, o.min_count);
    } else if (flag == "--fleet-n") {
      ok = parse_u64(v, 0, 1024, n);
      o.fleet_n = static_cast<uint32_t>(n);
    } else if (flag == "--min-reports") {
      ok = parse_u64(v, 1, core::kMaxMinReports, n);
      o.min_reports = static_cast<uint32_t>(n);
    } else if (flag == "--report-poll") {
      ok = parse_double(v, 0.0, o.report_poll);
    } else if (flag == "--peer-share") {
      ok = parse_double(v, 0.0, o.peer_share);
    } else if (flag == "--report-rounding") {
      ok = v == "up" || v == "random";
      o.report_round_up = v == "up";
    } else if (flag == "--clients") {
      ok = parse_u64(v, 1, 1u << 24, n);
      o.clients = static_cast<uint32_t>(n);
    } else if (flag == "--cache-objects") {
      ok = parse_u64(v, 0, 1ull << 32, o.cache_objects);
    } else if (flag == "--miss-delay") {
      ok = parse_double(v, 0.0, o.miss_delay);
    } else if (flag == "--warmup") {
      ok = parse_u64(v, 0, 1ull << 34, o.warmup_requests);
    } else if (flag == "--slack" || flag == "--hysteresis" || flag == "--spill-memory" ||
               flag == "--hot-share" || flag == "--max-replicas" || flag == "--hot-capacity" ||
               flag == "--haproxy-points" || flag == "--nginx-points") {
      ok = parse_u64(v, 0, 1u << 24, n);
      const auto u = static_cast<uint32_t>(n);
      if (flag == "--slack") o.slack = u;
      else if (flag == "--hysteresis") o.hysteresis = u;
      else if (flag == "--spill-memory") o.spill_memory = u;
      else if (flag == "--hot-share") o.hot_share = u;
      else if (flag == "--max-replicas") o.max_replicas = u;
      else if (flag == "--hot-capacity") o.hot_capacity = u;
      else if (flag == "--haproxy-points") o.haproxy_points = u;
      else o.nginx_points = u;
      if (flag == "--hot-capacity" || flag == "--haproxy-points" || flag == "--nginx-points") {
        ok = ok && u > 0;
      }
    } else if (flag == "--replica-choice") {
      if (v == "least") o.replica_choice = core::ReplicaChoice::kLeastLoaded;
      else if (v == "rr") o.replica_choice = core::ReplicaChoice::kRoundRobin;
      else ok = false;
    } else if (flag == "--check-max-spill") {
      ok = parse_double(v, 0.0, o.check_max_spill);
    } else if (flag == "--check-max-miss") {
      ok = parse_double(v, 0.0, o.check_max_miss);
    } else if (flag == "--check-max-ratio") {
      ok = parse_double(v, 0.0, o.check_max_ratio);
    } else if (flag == "--hot-window") {
      ok = parse_double(v, 1.0, o.hot_window);
    } else {
      return core::fail("unknown flag " + std::string(flag));
    }
    if (!ok) return core::fail("bad value '" + std::string(v) + "' for " + std::string(flag));
  }
  if (random_weights) {
    std::mt19937_64 rng(weight_seed);
    o.weights.resize(o.backends);
    for (auto& w : o.weights) w = static_cast<uint32_t>(1 + rng() % 4);
  }
  if (!o.weights.empty() && o.weights.size() != o.backends) {
    return core::fail("--weights lists " + std::to_string(o.weights.size()) +
                      " weights for --backends " + std::to_string(o.backends));
  }
  if (!to_algo_given) o.to_algo = o.algo;
  const uint32_t to_n = o.to_backends ? o.to_backends : o.backends;
  if (!o.to_weights.empty() && o.to_weights.size() != to_n) {
    return core::fail("--to-weights lists " + std::to_string(o.to_weights.size()) +
                      " weights for " + std::to_string(to_n) + " backends");
  }
  if (o.to_rename >= 0 && o.to_rename >= static_cast<int64_t>(to_n)) {
    return core::fail("--to-rename names backend " + std::to_string(o.to_rename) + " of " +
                      std::to_string(to_n));
  }
  if (o.algo == AlgoChoice::kJump && !o.weights.empty()) {
    return core::fail("jump hash has no weights (numbered shards only)");
  }
  if (o.algo == AlgoChoice::kJump && (o.replay || o.routing)) {
    return core::fail("--replay needs a Selector algorithm (ring, rendezvous, maglev)");
  }
  return o;
}

}  // namespace rondel::sim
