// rondel-sim: measures a placement algorithm (balance, churn, memory, speed) or replays a
// bounded-load request stream through it, printing text or one JSON object.
#include <cstdio>
#include <string>
#include <vector>

#include "balance.h"
#include "rondel/util/json_writer.h"
#include "options.h"
#include "replay.h"
#include "routing.h"
#include "fleet.h"
#include "transition.h"
#include "versus.h"

namespace rondel::sim {
namespace {

using util::JsonWriter;

// Check is one property verified by --check: its name, whether it held, and the evidence.
struct Check {
  std::string name;
  bool ok;
  std::string detail;
};

std::string fmt(const char* f, double a, double b) {
  char buf[128];
  std::snprintf(buf, sizeof buf, f, a, b);
  return buf;
}

// Writes the run parameters shared by both modes.
void write_params(JsonWriter& j, const SimOptions& o) {
  j.field("algo", algo_name(o.algo));
  j.field("backends", o.backends);
  j.field("weighted", !o.weights.empty());
  j.field("points_per_weight", o.points);
  j.field("maglev_table_size", o.maglev_table);
  j.field("keys", o.keys);
  j.field("zipf", o.zipf);
  j.field("seed", o.seed);
}

// Returns the properties --check verifies for a balance report.
std::vector<Check> balance_checks(const SimOptions& o, const BalanceReport& r) {
  std::vector<Check> checks;
  if (r.cv_theory > 0) {
    checks.push_back({"ring_cv_within_15pct_of_theory", r.cv_theory_error <= 0.15,
                      fmt("measured %.5f theory %.5f", r.cv_keys, r.cv_theory)});
  }
  bool consistent = o.algo != AlgoChoice::kMaglev;
  for (const auto* m : {&r.add, &r.remove}) {
    if (m->trials == 0) continue;
    const char* what = m == &r.add ? "add" : "remove";
    if (consistent) {
      checks.push_back({std::string(what) + "_movement_within_10pct_of_ideal", m->error <= 0.10,
                        fmt("moved %.5f ideal %.5f", m->moved_mean, m->ideal)});
      checks.push_back({std::string(what) + "_no_stray_moves", m->stray_keys == 0,
                        fmt("stray keys %.0f (share %.6f)", static_cast<double>(m->stray_keys),
                            m->stray_share)});
    }
  }
  return checks;
}

// Returns the properties --check verifies for a replay report.
std::vector<Check> replay_checks(const SimOptions& o, const ReplayReport& r) {
  std::vector<Check> checks;
  if (o.balance_factor == 0) return checks;
  checks.push_back({"no_cap_violations", r.cap_violations == 0,
                    fmt("violations %.0f, max in_flight/cap %.4f",
                        static_cast<double>(r.cap_violations), r.max_cap_ratio)});
  checks.push_back({"no_false_all_full", r.false_all_full == 0,
                    fmt("false all_full %.0f of %.0f all_full",
                        static_cast<double>(r.false_all_full), static_cast<double>(r.all_full))});
  if (o.probe == core::ProbeOrder::kClockwise) {
    checks.push_back({"clockwise_picks_first_with_room", r.order_violations == 0,
                      fmt("order violations %.0f of %.0f picks", static_cast<double>(r.order_violations),
                          static_cast<double>(r.requests))});
  }
  return checks;
}

void write_checks(JsonWriter& j, const std::vector<Check>& checks) {
  j.begin("checks");
  for (const Check& c : checks) j.field(c.name, c.ok);
  j.end();
}

void print_checks(const std::vector<Check>& checks) {
  for (const Check& c : checks) {
    std::printf("check %-40s %s  (%s)\n", c.name.c_str(), c.ok ? "ok" : "FAILED",
                c.detail.c_str());
  }
}

void write_movement(JsonWriter& j, const char* key, const Movement& m) {
  j.begin(key);
  j.field("trials", m.trials);
  j.field("moved", m.moved_mean);
  j.field("moved_min", m.moved_min);
  j.field("moved_max", m.moved_max);
  j.field("ideal", m.ideal);
  j.field("relative_error", m.error);
  j.field("stray_keys", m.stray_keys);
  j.field("stray_share", m.stray_share);
  j.end();
}

void print_movement(const char* what, const Movement& m) {
  if (m.trials == 0) return;
  std::printf("%-7s moved %.5f of keys (min %.5f max %.5f over %u trials), ideal %.5f, "
              "error %.1f%%, stray %llu keys (%s)\n",
              what, m.moved_mean, m.moved_min, m.moved_max, m.trials, m.ideal, 100 * m.error,
              static_cast<unsigned long long>(m.stray_keys),
              m.stray_keys == 0 ? "moved keys only touched the churned backend"
                                : "keys also moved between surviving backends");
}

// Writes one routing report as a JSON object on one line.
void print_routing_json(const SimOptions& o, const RoutingReport& r,
                        const std::vector<Check>& checks) {
  JsonWriter j;
  j.begin();
  write_params(j, o);
  j.field("mode", "routing");
  j.field("policy", r.policy);
  j.field("balance_factor", r.balance_factor);
  j.field("clients", o.clients);
  j.field("cache_objects", o.cache_objects);
  j.field("miss_delay", o.miss_delay);
  j.field("mean_service", o.mean_service);
  j.field("requests", o.requests);
  j.field("measured_requests", r.measured);
  j.field("req_max_over_avg", r.req_max_over_avg);
  j.field("inflight_mean_max_over_avg", r.inflight_mean_max_over_avg);
  j.field("inflight_peak_max_over_avg", r.inflight_peak_max_over_avg);
  j.field("max_in_flight_over_cap", r.max_cap_ratio);
  j.field("cap_violations", r.cap_violations);
  j.field("spill", r.spill);
  j.field("spill_overflow", r.spill_overflow);
  j.field("spill_sticky", r.spill_sticky);
  j.field("spill_replica", r.spill_replica);
  j.field("miss_rate", r.miss_rate);
  j.field("keys_multi_backend", r.keys_multi);
  j.field("requests_multi_backend", r.requests_multi);
  j.field("visits_mean", r.visits_mean);
  j.field("hot_keys", r.hot_keys);
  j.begin("per_backend");
  for (size_t i = 0; i < r.requests_per_backend.size() && i < 64; ++i) {
    j.begin(std::to_string(i));
    j.field("requests", r.requests_per_backend[i]);
    j.field("misses", r.misses_per_backend[i]);
    j.end();
  }
  j.end();
  j.begin("keys_by_visits");
  for (size_t i = 0; i < r.keys_by_visits.size(); ++i) {
    j.field(std::to_string(i + 1), r.keys_by_visits[i]);
  }
  j.end();
  j.field("wall_seconds", r.wall_seconds);
  if (o.check) write_checks(j, checks);
  j.end();
  std::printf("%s\n", j.str().c_str());
}

// Returns the properties --check verifies for a routing report.
std::vector<Check> routing_checks(const SimOptions& o, const RoutingReport& r) {
  std::vector<Check> checks;
  if (r.balance_factor != 0) {
    checks.push_back({"no_cap_violations", r.cap_violations == 0,
                      fmt("violations %.0f, max in_flight/cap %.4f",
                          static_cast<double>(r.cap_violations), r.max_cap_ratio)});
  }
  if (o.check_max_spill >= 0) {
    checks.push_back({"spill_at_most", r.spill <= o.check_max_spill,
                      fmt("spill %.5f limit %.5f", r.spill, o.check_max_spill)});
  }
  if (o.check_max_miss >= 0) {
    checks.push_back({"miss_rate_at_most", r.miss_rate <= o.check_max_miss,
                      fmt("miss rate %.5f limit %.5f", r.miss_rate, o.check_max_miss)});
  }
  if (o.check_max_ratio > 0) {
    checks.push_back({"req_max_over_avg_at_most", r.req_max_over_avg <= o.check_max_ratio,
                      fmt("max/avg %.4f limit %.4f", r.req_max_over_avg, o.check_max_ratio)});
  }
  return checks;
}

// Runs --versus: times --algo and the others interleaved, writes JSON "versus" and prints a
// table. Returns false (after printing why) if a placement cannot be built.
bool run_versus_mode(const SimOptions& o, JsonWriter& j) {
  auto res = run_versus(o);
  if (!res) {
    std::fprintf(stderr, "rondel-sim: %s\n", res.error().message.c_str());
    return false;
  }
  j.begin("versus");
  for (const VersusEntry& e : *res) {
    j.begin(algo_name(e.algo));
    j.field("lookup_ns", e.lookup_ns);
    j.field("ratio_to_algo", e.ratio_to_first);
    j.field("memory_bytes", e.memory_bytes);
    j.field("probe_keys", e.probe_keys);
    j.end();
  }
  j.end();
  if (!o.json) {
    std::printf("versus (interleaved, same keys, median of %u reps):\n",
                std::max<uint32_t>(3, o.lookup_reps));
    for (const VersusEntry& e : *res) {
      std::printf("  %-20s %10.1f ns/op  x%.2f of %s  memory %llu bytes\n", algo_name(e.algo),
                  e.lookup_ns, e.ratio_to_first, algo_name(o.algo),
                  static_cast<unsigned long long>(e.memory_bytes));
    }
  }
  return true;
}

// Runs every (policy, balance factor) pair of a --routing run and prints the curve.
int run_routing_mode(const SimOptions& o) {
  std::vector<std::string> policies = o.policies;
  if (policies.empty()) policies.push_back("rondel");
  std::vector<uint32_t> factors = o.sweep;
  if (factors.empty()) factors.push_back(o.balance_factor);
  if (!o.json) {
    std::printf("routing replay: %u backends, %llu keys Zipf(%.2f), %s, service %.3g + miss "
                "%.3g, LRU %llu objects per backend, %llu requests (%llu warm-up)\n",
                o.backends, static_cast<unsigned long long>(o.keys), o.zipf,
                o.clients ? (std::to_string(o.clients) + " clients (closed loop)").c_str()
                          : "Poisson arrivals",
                o.mean_service, o.miss_delay, static_cast<unsigned long long>(o.cache_objects),
                static_cast<unsigned long long>(o.requests),
                static_cast<unsigned long long>(o.warmup_requests ? o.warmup_requests
                                                                  : o.requests / 5));
    std::printf("%-8s %6s %8s %8s %8s %8s %8s %8s %8s %8s %8s %6s\n", "policy", "factor",
                "req m/a", "infl m/a", "infl pk", "spill", "overflow", "sticky", "replica",
                "miss", "keys>1", "hot");
  }
  bool all_ok = true;
  for (const std::string& p : policies) {
    for (uint32_t f : factors) {
      auto res = run_routing(o, p, f);
      if (!res) {
        std::fprintf(stderr, "rondel-sim: %s\n", res.error().message.c_str());
        return 2;
      }
      const RoutingReport& r = *res;
      std::vector<Check> checks = routing_checks(o, r);
      for (const Check& c : checks) all_ok = all_ok && c.ok;
      if (o.json) {
        print_routing_json(o, r, checks);
      } else {
        std::printf("%-8s %6u %8.4f %8.4f %8.4f %8.4f %8.4f %8.4f %8.4f %8.5f %8.4f %6llu\n",
                    r.policy.c_str(), r.balance_factor, r.req_max_over_avg,
                    r.inflight_mean_max_over_avg, r.inflight_peak_max_over_avg, r.spill,
                    r.spill_overflow, r.spill_sticky, r.spill_replica, r.miss_rate,
                    r.keys_multi, static_cast<unsigned long long>(r.hot_keys));
        if (o.check) print_checks(checks);
      }
      std::fflush(stdout);
    }
  }
  return o.check && !all_ok ? 1 : 0;
}

// Runs --to-*: prints the share of keys one configuration change moves.
int run_transition_mode(const SimOptions& o) {
  auto res = run_transition(o);
  if (!res) {
    std::fprintf(stderr, "rondel-sim: %s\n", res.error().message.c_str());
    return 2;
  }
  JsonWriter j;
  j.begin();
  write_params(j, o);
  j.field("mode", "transition");
  j.field("to_algo", algo_name(o.to_algo));
  j.field("to_backends", o.to_backends ? o.to_backends : o.backends);
  j.field("moved", res->moved);
  j.end();
  if (o.json) {
    std::printf("%s\n", j.str().c_str());
  } else {
    std::printf("%s -> %s: %.5f of %llu keys change owner\n", algo_name(o.algo),
                algo_name(o.to_algo), res->moved, static_cast<unsigned long long>(res->keys));
  }
  return 0;
}

// Runs the fleet model without and with reports and prints one line (or JSON object) each.
int run_fleet_mode(const SimOptions& o) {
  for (bool reports : {false, true}) {
    auto res = run_fleet(o, reports);
    if (!res) {
      std::fprintf(stderr, "rondel-sim: %s\n", res.error().message.c_str());
      return 2;
    }
    const FleetReport& r = *res;
    if (o.json) {
      JsonWriter j;
      j.begin();
      j.field("mode", "fleet");
      j.field("reports", r.reports);
      j.field("measured", r.measured);
      j.field("max_over_mean", r.max_over_mean);
      j.field("max_over_mean_peak", r.max_over_mean_peak);
      j.field("max_over_cap", r.max_over_cap);
      j.field("over_cap_share", r.over_cap_share);
      j.field("spill", r.spill);
      j.field("miss_rate", r.miss_rate);
      j.field("stale_reads", r.stale_reads);
      j.field("fresh_reads", r.fresh_reads);
      j.field("mean_report_age", r.mean_report_age);
      j.field("reports_per_backend", r.reports_per_backend);
      j.end();
      std::printf("%s\n", j.str().c_str());
    } else {
      std::printf("%-8s max/mean in flight %.4f (peak %.4f)  max/cap %.4f  over cap %.4f"
                  "  spill %.4f  miss %.4f  stale reads %llu  fresh %llu  age %.3f"
                  "  reports/backend/t %.3f\n",
                  r.reports ? "reports" : "local", r.max_over_mean, r.max_over_mean_peak,
                  r.max_over_cap, r.over_cap_share, r.spill, r.miss_rate,
                  static_cast<unsigned long long>(r.stale_reads),
                  static_cast<unsigned long long>(r.fresh_reads), r.mean_report_age,
                  r.reports_per_backend);
    }
  }
  return 0;
}

// Runs --hot-agreement unaware of the fleet (scale 1) then scaled by its size.
int run_hot_agreement_mode(const SimOptions& o) {
  for (uint32_t scale : {uint32_t{1}, static_cast<uint32_t>(o.fleet_split.size())}) {
    auto res = run_hot_agreement(o, scale);
    if (!res) {
      std::fprintf(stderr, "rondel-sim: %s\n", res.error().message.c_str());
      return 2;
    }
    const HotAgreementReport& r = *res;
    const double keys = r.keys_compared ? 1.0 * r.keys_agreed / r.keys_compared : 1.0;
    const double checks = r.checks ? 1.0 * r.checks_agreed / r.checks : 1.0;
    const double traffic = r.share_compared > 0 ? r.share_agreed / r.share_compared : 1.0;
    if (o.json) {
      JsonWriter j;
      j.begin();
      j.field("mode", "hot_agreement");
      j.field("scale", uint64_t{scale});
      j.field("checks", r.checks);
      j.field("keys_compared", r.keys_compared);
      j.field("key_agreement", keys);
      j.field("check_agreement", checks);
      j.field("traffic_agreement", traffic);
      j.end();
      std::printf("%s\n", j.str().c_str());
    } else {
      std::printf("scale %u  checks %llu  keys compared %llu  keys agreed %.4f  hot-key traffic"
                  " agreed %.4f  checks with every key agreed %.4f\n", scale,
                  static_cast<unsigned long long>(r.checks),
                  static_cast<unsigned long long>(r.keys_compared), keys, traffic, checks);
    }
  }
  return 0;
}

int run(const SimOptions& o) {
  if (o.hot_agreement) return run_hot_agreement_mode(o);
  if (o.routing) return run_routing_mode(o);
  if (o.fleet) return run_fleet_mode(o);
  if (o.transition) return run_transition_mode(o);
  std::vector<Check> checks;
  JsonWriter j;
  j.begin();
  write_params(j, o);
  if (!o.replay) {
    auto res = run_balance(o);
    if (!res) {
      std::fprintf(stderr, "rondel-sim: %s\n", res.error().message.c_str());
      return 2;
    }
    const BalanceReport& r = *res;
    checks = balance_checks(o, r);
    j.field("mode", "balance");
    j.begin("balance");
    j.field("max_over_avg", r.max_over_avg);
    j.field("min_over_avg", r.min_over_avg);
    j.field("cv", r.cv_keys);
    j.field("cv_hash_space", r.cv_space >= 0 ? r.cv_space : NAN);
    j.field("cv_theory", r.cv_theory >= 0 ? r.cv_theory : NAN);
    j.field("cv_theory_relative_error", r.cv_theory >= 0 ? r.cv_theory_error : NAN);
    j.end();
    write_movement(j, "add", r.add);
    write_movement(j, "remove", r.remove);
    j.field("memory_bytes", r.memory_bytes);
    j.field("points", r.points);
    j.field("bytes_per_point", r.bytes_per_point);
    j.field("build_ms", r.build_ms);
    j.field("lookup_ns", r.lookup_ns);
    if (!o.json) {
      std::printf("%s, %u backends%s, %llu keys%s\n", algo_name(o.algo), o.backends,
                  o.weights.empty() ? "" : " (weighted)",
                  static_cast<unsigned long long>(o.keys),
                  o.zipf > 0 ? " (Zipf-weighted loads)" : "");
      std::printf("balance max/avg %.4f  min/avg %.4f  CV %.5f", r.max_over_avg, r.min_over_avg,
                  r.cv_keys);
      if (r.cv_space >= 0) std::printf("  (hash-space CV %.5f)", r.cv_space);
      if (r.cv_theory >= 0) {
        std::printf("  theory sqrt((N-1)/(N*k+1)) = %.5f (off by %.1f%%)", r.cv_theory,
                    100 * r.cv_theory_error);
      }
      std::printf("\n");
      print_movement("add", r.add);
      print_movement("remove", r.remove);
      std::printf("memory  %llu bytes, %llu points, %.2f bytes/point\n",
                  static_cast<unsigned long long>(r.memory_bytes),
                  static_cast<unsigned long long>(r.points), r.bytes_per_point);
      std::printf("build   %.3f ms (median)\nlookup  %.1f ns/op (median of %zu reps)\n",
                  r.build_ms, r.lookup_ns, r.lookup_ns_reps.size());
    }
    if (!o.versus.empty() && !run_versus_mode(o, j)) return 2;
  } else {
    auto res = run_replay(o);
    if (!res) {
      std::fprintf(stderr, "rondel-sim: %s\n", res.error().message.c_str());
      return 2;
    }
    const ReplayReport& r = *res;
    checks = replay_checks(o, r);
    const char* probe = core::name_of(o.probe).data();
    j.field("mode", "replay");
    j.begin("replay");
    j.field("balance_factor", o.balance_factor);
    j.field("probe", probe);
    j.field("requests", r.requests);
    j.field("measured_requests", r.measured);
    j.field("arrival_rate", o.arrival_rate);
    j.field("mean_service", o.mean_service);
    j.field("offered_in_flight", r.offered_in_flight);
    j.field("mean_in_flight", r.mean_in_flight);
    j.field("max_over_avg_in_flight_peak", r.peak_max_over_avg);
    j.field("max_over_avg_in_flight_mean", r.mean_max_over_avg);
    j.field("max_in_flight_over_cap", r.max_cap_ratio);
    j.field("cap_violations", r.cap_violations);
    j.field("false_all_full", r.false_all_full);
    j.field("order_violations", r.order_violations);
    j.field("capacity_mismatches", r.capacity_mismatches);
    j.field("all_full", r.all_full);
    j.field("spill_share", r.spill_share);
    j.field("mean_hops", r.mean_hops);
    j.field("max_hops", r.max_hops);
    j.field("spill_to_successor", r.spill_to_successor);
    j.field("spill_max_over_avg", r.spill_max_over_avg);
    j.field("wall_seconds", r.wall_seconds);
    j.end();
    if (!o.json) {
      char factor[32] = "unbounded";
      if (o.balance_factor) std::snprintf(factor, sizeof factor, "%.2f", o.balance_factor / 100.0);
      std::printf("replay %s, %u backends, %llu keys Zipf(%.2f), c = %s, probe %s\n",
                  algo_name(o.algo), o.backends, static_cast<unsigned long long>(o.keys), o.zipf,
                  factor,
                  probe);
      std::printf("requests %llu (%llu measured after warm-up), offered in flight %.1f, "
                  "time-averaged %.1f\n",
                  static_cast<unsigned long long>(r.requests),
                  static_cast<unsigned long long>(r.measured), r.offered_in_flight,
                  r.mean_in_flight);
      std::printf("max/avg in flight at arrivals: peak %.3f  mean %.3f\n", r.peak_max_over_avg,
                  r.mean_max_over_avg);
      if (o.balance_factor) {
        std::printf("max in_flight/cap at pick %.4f  cap violations %llu  all_full %llu  "
                    "order violations %llu  capacity mismatches %llu\n",
                    r.max_cap_ratio, static_cast<unsigned long long>(r.cap_violations),
                    static_cast<unsigned long long>(r.all_full),
                    static_cast<unsigned long long>(r.order_violations),
                    static_cast<unsigned long long>(r.capacity_mismatches));
      }
      std::printf("spill %.4f of requests, hops mean %.4f max %u\n", r.spill_share, r.mean_hops,
                  r.max_hops);
      std::printf("spill to owner's successor %.4f, max/avg spill received %.3f\n",
                  r.spill_to_successor, r.spill_max_over_avg);
      std::printf("wall %.2f s\n", r.wall_seconds);
    }
  }
  bool all_ok = true;
  for (const Check& c : checks) all_ok = all_ok && c.ok;
  if (o.check) write_checks(j, checks);
  j.end();
  if (o.json) {
    std::printf("%s\n", j.str().c_str());
  } else if (o.check) {
    print_checks(checks);
  }
  return o.check && !all_ok ? 1 : 0;
}

}  // namespace
}  // namespace rondel::sim

int main(int argc, char** argv) {
  auto opt = rondel::sim::parse_options(argc, argv);
  if (!opt) {
    bool help = opt.error().message.empty();
    if (!help) std::fprintf(stderr, "rondel-sim: %s\n", opt.error().message.c_str());
    std::fputs(rondel::sim::usage().c_str(), help ? stdout : stderr);
    return help ? 0 : 2;
  }
  return rondel::sim::run(*opt);
}
