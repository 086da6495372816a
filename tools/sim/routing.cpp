// Routing-policy replay with per-backend LRU caches (see routing.h and docs/routing.md).
//
// Load: --clients K gives a closed loop (K clients, each sending its next request the moment
// the previous one completes: K requests always in flight, like a benchmark with K
// connections); without it, Poisson arrivals at --arrival-rate. Keys: Zipf(S) over M keys
// (S = 0: uniform). Service: exponential of mean T, plus D on a cache miss. Caches: each
// backend an LRU of C objects, filled on the miss (at arrival). All randomness from one seeded
// mt19937_64: a run is reproducible.
//
// Policies:
//   haproxy  HAProxy 2.x `hash-type consistent` + `hash-balance-factor` (lb_chash.c): a ring of
//            16 points per unit of weight (BE_WEIGHT_SCALE), the key goes to the nearest point
//            (before or after it), a full backend is passed over point by point clockwise; a
//            backend is full when served >= its slots, where ceil((m + 1) * c) total slots are
//            split over backends in weight order, floor for all and the remainder by cumulative
//            weight (chash_server_is_eligible). Points are placed by rondel's ring (XXH3 of the
//            id and point number) instead of HAProxy's full_hash(puid * SRV_EWGHT_RANGE + i):
//            the same number of independent random points, not the same positions.
//   nginx    nginx `hash $key consistent`: a 160-point ring (--nginx-points), no bound.
//   bounded  rondel's bounded_pick (today's daemon): --algo/--points selector, --probe order.
//   rondel   the shipped policy, core::RoutePolicy (what each daemon worker runs): route_pick
//            with --slack, --hysteresis and a SpillMemory of --spill-memory entries, hot-key
//            replicas from HotKeys (space-saving top-K over --hot-window) feeding a HotReplicas
//            table rebuilt every quarter window (--hot-share, --max-replicas).
#include "routing.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <functional>
#include <memory>
#include <queue>
#include <random>
#include <utility>
#include <vector>

#include "balance.h"
#include "lru.h"
#include "placement.h"
#include "rondel/core/bitset.h"
#include "rondel/core/bounded.h"
#include "rondel/core/route_policy.h"
#include "zipf.h"

namespace rondel::sim {
namespace {

double routing_exponential(std::mt19937_64& rng, double mean) {
  double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;
  return -std::log1p(-u) * mean;
}

enum class Policy { kHaproxy, kNginx, kBounded, kRondel };

bool parse_policy(const std::string& s, Policy& p) {
  if (s == "haproxy") p = Policy::kHaproxy;
  else if (s == "nginx") p = Policy::kNginx;
  else if (s == "bounded") p = Policy::kBounded;
  else if (s == "rondel") p = Policy::kRondel;
  else return false;
  return true;
}

// HAProxy's per-server slot count (chash_server_is_eligible), servers in index order.
uint32_t haproxy_slots(uint64_t served_total, uint32_t factor, uint32_t w, uint64_t cum_w,
                       uint64_t tot_w) {
  const uint64_t tot_slots = ((served_total + 1) * factor + 99) / 100;
  const uint64_t per_weight = tot_slots / tot_w;
  const uint64_t rem = tot_slots % tot_w;
  uint64_t slots = w * per_weight;
  slots += ((cum_w + w) * rem) / tot_w - (cum_w * rem) / tot_w;
  return static_cast<uint32_t>(std::max<uint64_t>(slots, 1));
}

// The eligible-backend count the shipped policy asks for when it rebuilds its replica table.
size_t eligible_of(const void* set) noexcept {
  return static_cast<const core::BackendSet*>(set)->eligible_count();
}

}  // namespace

bool valid_policy(const std::string& name) {
  Policy p;
  return parse_policy(name, p);
}

core::Result<RoutingReport> run_routing(const SimOptions& opt_in, const std::string& policy_name,
                                        uint32_t factor) {
  const auto wall0 = std::chrono::steady_clock::now();
  Policy policy;
  if (!parse_policy(policy_name, policy)) return core::fail("unknown policy " + policy_name);
  SimOptions opt = opt_in;
  if (policy == Policy::kHaproxy) {
    opt.algo = AlgoChoice::kRing;
    opt.points = opt.haproxy_points;
  } else if (policy == Policy::kNginx) {
    opt.algo = AlgoChoice::kRing;
    opt.points = opt.nginx_points;
    factor = 0;
  }
  if (opt.keys > UINT32_MAX) return core::fail("--routing takes at most 2^32 - 1 keys");
  if (opt.cache_objects > 0 && opt.keys * opt.backends > 200'000'000ull) {
    return core::fail("--routing with a cache model: backends * keys must stay below 2e8");
  }
  std::vector<SimBackend> pool;
  for (uint32_t g = 0; g < opt.backends; ++g) {
    pool.push_back(make_backend(g, opt.weights.empty() ? 1 : opt.weights[g]));
  }
  auto placement = Placement::build(opt.algo, pool, opt);
  if (!placement) return placement.error();
  const core::Selector& sel = *placement->selector();
  const core::BackendSet& set = *placement->backend_set();
  const size_t n = set.size();
  std::vector<uint32_t> weights(n);
  std::vector<uint64_t> cum_weight(n);
  uint64_t total_weight = 0;
  for (size_t i = 0; i < n; ++i) {
    weights[i] = set[static_cast<core::BackendIndex>(i)].weight;
    cum_weight[i] = total_weight;
    total_weight += weights[i];
  }

  auto in_flight = std::make_unique<std::atomic<uint32_t>[]>(n);
  for (size_t i = 0; i < n; ++i) in_flight[i].store(0, std::memory_order_relaxed);
  auto load = [&](size_t b) { return in_flight[b].load(std::memory_order_relaxed); };
  std::vector<uint64_t> excluded(core::bitset_words(n), 0);
  std::vector<uint64_t> scratch(std::max<size_t>(core::pick_scratch_words(sel), 1));
  std::vector<LruCache> caches;
  for (size_t i = 0; i < n; ++i) caches.emplace_back(opt.cache_objects, opt.keys);

  core::RouteOptions ro;
  ro.bounded.balance_factor = factor;
  ro.bounded.probe = opt.probe;
  if (policy == Policy::kRondel) {
    ro.bounded.slack = opt.slack;
    ro.hysteresis = opt.hysteresis;
    ro.replica_choice = opt.replica_choice;
  }
  // The shipped routing policy (core::RoutePolicy, as each daemon worker runs it): stable spill
  // and hot-key replicas for "rondel", neither for "bounded".
  core::RoutePolicyOptions po;
  po.route = ro;
  if (policy == Policy::kRondel) {
    po.spill_entries = opt.spill_memory;
    po.hot_share_pct = opt.hot_share;
    po.hot_capacity = opt.hot_capacity;
    po.hot_window_ms = std::max<uint64_t>(1, static_cast<uint64_t>(opt.hot_window));
    po.max_replicas = opt.max_replicas;
  }
  core::RoutePolicy route_policy(po);

  std::vector<uint64_t> key_hashes(opt.keys);
  for (uint64_t i = 0; i < opt.keys; ++i) key_hashes[i] = key_hash(opt.seed, i);
  ZipfSampler zipf(opt.keys, opt.zipf);
  std::mt19937_64 rng(opt.seed * 0x2545F4914F6CDD1DULL + 11);

  const size_t words = core::bitset_words(n);
  std::vector<uint64_t> visited(opt.keys * words, 0);
  std::vector<uint64_t> key_requests(opt.keys, 0);

  RoutingReport r;
  r.policy = policy_name;
  r.balance_factor = factor;
  r.requests_per_backend.assign(n, 0);
  r.misses_per_backend.assign(n, 0);
  const uint64_t warmup =
      opt.warmup_requests > 0 ? opt.warmup_requests : opt.requests / 5;
  uint64_t spilled = 0, overflow = 0, sticky = 0, replica = 0, misses = 0;
  double inflight_ratio_sum = 0.0;

  using Departure = std::pair<double, core::BackendIndex>;
  std::priority_queue<Departure, std::vector<Departure>, std::greater<>> departures;
  uint64_t total = 0;

  // Places one request arriving at `now`.
  auto arrive = [&](uint64_t req, double now) {
    const uint64_t key = zipf(rng);
    const uint64_t hash = key_hashes[key];
    core::BackendIndex chosen = core::kNoBackend, home = core::kNoBackend;
    uint32_t cap = UINT32_MAX;
    core::RouteReason reason = core::RouteReason::kHome;
    if (policy == Policy::kHaproxy) {
      const core::Ring& ring = *sel.ring();
      const auto pos = ring.positions();
      const auto owners = ring.owners();
      const size_t points = pos.size();
      const auto h = static_cast<uint32_t>(hash >> 32);
      size_t next = ring.first_point(hash);
      size_t prev = next == 0 ? points - 1 : next - 1;
      const uint32_t dp = h - pos[prev];
      const uint32_t dn = pos[next] - h;
      size_t at = dp <= dn ? prev : next;
      home = owners[at];
      chosen = home;
      if (factor != 0) {
        for (size_t step = 0; step < points; ++step) {
          const core::BackendIndex b = owners[at];
          const uint32_t slots =
              haproxy_slots(total, factor, weights[b], cum_weight[b], total_weight);
          if (load(b) < slots) {
            chosen = b;
            cap = slots;
            break;
          }
          at = at + 1 == points ? 0 : at + 1;
        }
      }
      if (chosen != home) reason = core::RouteReason::kSpill;
    } else if (policy == Policy::kNginx || factor == 0) {
      chosen = home = sel.owner(hash);
    } else {
      core::PickInput in;
      in.in_flight = std::span<const std::atomic<uint32_t>>(in_flight.get(), n);
      in.weights = weights;
      in.total_in_flight = total;
      in.total_weight = total_weight;
      in.excluded = excluded;
      const core::RouteResult rr = route_policy.route(
          sel, hash, {}, in, static_cast<uint64_t>(now), core::PickKind::kFirst,
          core::Affinity::kKey, {&eligible_of, &set}, scratch);
      chosen = rr.pick.backend;
      home = rr.home;
      cap = rr.pick.capacity;
      reason = rr.reason;
    }
    if (cap != UINT32_MAX) {
      const uint32_t after = load(chosen) + 1;
      r.max_cap_ratio = std::max(r.max_cap_ratio, static_cast<double>(after) / cap);
      if (after > cap) {
        bool some_room = false;
        for (size_t i = 0; i < n && !some_room; ++i) {
          const uint32_t c =
              policy == Policy::kHaproxy
                  ? haproxy_slots(total, factor, weights[i], cum_weight[i], total_weight)
                  : core::capacity(total, weights[i], total_weight, ro.bounded);
          some_room = load(i) < c;
        }
        if (some_room) ++r.cap_violations;
      }
    }
    const bool hit = caches[chosen].access(static_cast<uint32_t>(key));
    double service = routing_exponential(rng, opt.mean_service);
    if (!hit) service += opt.miss_delay;
    in_flight[chosen].fetch_add(1, std::memory_order_relaxed);
    ++total;
    departures.emplace(now + service, chosen);

    if (req < warmup) return;
    ++r.measured;
    ++r.requests_per_backend[chosen];
    ++key_requests[key];
    core::bit_set(std::span<uint64_t>(visited.data() + key * words, words), chosen);
    if (!hit) {
      ++misses;
      ++r.misses_per_backend[chosen];
    }
    if (chosen != home) {
      ++spilled;
      if (reason == core::RouteReason::kSticky) ++sticky;
      else if (reason == core::RouteReason::kReplica) ++replica;
      else ++overflow;
    }
    double worst = 0.0;
    for (size_t i = 0; i < n; ++i) {
      worst = std::max(worst, static_cast<double>(load(i)) * total_weight / weights[i]);
    }
    const double ratio = worst / total;
    inflight_ratio_sum += ratio;
    r.inflight_peak_max_over_avg = std::max(r.inflight_peak_max_over_avg, ratio);
  };

  auto depart = [&]() {
    const auto [when, b] = departures.top();
    departures.pop();
    in_flight[b].fetch_sub(1, std::memory_order_relaxed);
    --total;
    return when;
  };

  if (opt.clients > 0) {
    uint64_t req = 0;
    for (; req < opt.clients && req < opt.requests; ++req) arrive(req, 0.0);
    for (; req < opt.requests; ++req) arrive(req, depart());
  } else {
    double now = 0.0;
    for (uint64_t req = 0; req < opt.requests; ++req) {
      now += routing_exponential(rng, 1.0 / opt.arrival_rate);
      while (!departures.empty() && departures.top().first <= now) depart();
      arrive(req, now);
    }
  }

  if (r.measured > 0) {
    const double m = static_cast<double>(r.measured);
    r.spill = spilled / m;
    r.spill_overflow = overflow / m;
    r.spill_sticky = sticky / m;
    r.spill_replica = replica / m;
    r.miss_rate = misses / m;
    r.inflight_mean_max_over_avg = inflight_ratio_sum / m;
    double worst = 0.0;
    for (size_t i = 0; i < n; ++i) {
      worst = std::max(worst, static_cast<double>(r.requests_per_backend[i]) * total_weight /
                                  weights[i]);
    }
    r.req_max_over_avg = worst / m;
  }
  uint64_t keys_seen = 0, multi = 0, visits = 0, req_multi = 0;
  r.keys_by_visits.assign(std::min<size_t>(n, 8), 0.0);
  for (uint64_t k = 0; k < opt.keys; ++k) {
    if (key_requests[k] == 0) continue;
    uint32_t v = 0;
    for (size_t w = 0; w < words; ++w) v += std::popcount(visited[k * words + w]);
    ++keys_seen;
    visits += v;
    r.keys_by_visits[std::min<size_t>(v, r.keys_by_visits.size()) - 1] += 1;
    if (v > 1) {
      ++multi;
      req_multi += key_requests[k];
    }
  }
  if (keys_seen > 0) {
    r.keys_multi = static_cast<double>(multi) / keys_seen;
    r.visits_mean = static_cast<double>(visits) / keys_seen;
    for (double& x : r.keys_by_visits) x /= keys_seen;
  }
  if (r.measured > 0) r.requests_multi = static_cast<double>(req_multi) / r.measured;
  if (policy == Policy::kRondel) r.hot_keys = route_policy.hot().size();
  r.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  return r;
}

}  // namespace rondel::sim
