// Fleet replay (see fleet.h): closed loop, exponential service (+ miss delay), LRU caches.
#include "fleet.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <queue>
#include <random>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "balance.h"
#include "lru.h"
#include "placement.h"
#include "rondel/core/bitset.h"
#include "rondel/core/bounded.h"
#include "rondel/core/reported_load.h"
#include "rondel/core/route_policy.h"
#include "zipf.h"

namespace rondel::sim {
namespace {

double fleet_exponential(std::mt19937_64& rng, double mean) {
  double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;
  return -std::log1p(-u) * mean;
}

// One instance's view: its own in-flight counts and its last report per backend.
struct Instance {
  std::vector<uint32_t> local;
  // Per backend: reported, at (time units * 1000), this instance's count then; local_in_flight
  // is filled from `local` at each pick.
  std::vector<core::ReportView> report;
  std::vector<uint32_t> loads;           // scratch: what the pick compares
  std::vector<uint64_t> rounded;         // scratch: backends read from a fresh report
  // Per backend: the arrival times of its last reports (a ring), for --min-reports.
  std::vector<std::array<uint64_t, core::kMaxMinReports>> arrivals;
  std::vector<uint32_t> next_arrival;
  void note(size_t b, const core::ReportView& v) {
    report[b] = v;
    arrivals[b][next_arrival[b]++ % core::kMaxMinReports] = v.at_ms;
  }
};

}  // namespace

core::Result<FleetReport> run_fleet(const SimOptions& opt, bool reports) {
  if (opt.clients == 0) return core::fail("--fleet needs --clients K");
  if (opt.fleet_split.empty()) return core::fail("--fleet needs --fleet-split");
  std::vector<SimBackend> pool;
  for (uint32_t g = 0; g < opt.backends; ++g) pool.push_back(make_backend(g, 1));
  auto placement = Placement::build(opt.algo, pool, opt);
  if (!placement) return placement.error();
  const core::Selector& sel = *placement->selector();
  const size_t n = placement->backend_set()->size();
  std::vector<uint32_t> weights(n, 1);
  std::vector<uint64_t> scratch(std::max<size_t>(core::pick_scratch_words(sel), 1));
  std::vector<LruCache> caches;
  for (size_t i = 0; i < n; ++i) caches.emplace_back(opt.cache_objects, opt.keys);
  core::BoundedOptions bo;
  bo.balance_factor = opt.balance_factor;
  bo.slack = opt.slack;
  bo.probe = opt.probe;

  // Clients per instance by share, the remainder to the first.
  const size_t l = opt.fleet_split.size();
  uint64_t share_sum = 0;
  for (uint32_t s : opt.fleet_split) share_sum += s;
  std::vector<uint32_t> client_instance;
  for (size_t k = 0; k < l; ++k) {
    const uint64_t c = opt.clients * uint64_t{opt.fleet_split[k]} / share_sum;
    client_instance.insert(client_instance.end(), c, static_cast<uint32_t>(k));
  }
  while (client_instance.size() < opt.clients) client_instance.insert(client_instance.begin(), 0);
  std::vector<Instance> inst(l);
  for (Instance& x : inst) {
    x.local.assign(n, 0);
    x.report.assign(n, {});
    x.loads.assign(n, 0);
    x.rounded.assign(core::bitset_words(n), 0);
    x.arrivals.assign(n, {});
    x.next_arrival.assign(n, 0);
  }
  std::vector<uint32_t> truth(n, 0);
  uint64_t truth_total = 0;
  const bool peers = reports && opt.peer_share > 0;
  std::vector<std::vector<uint32_t>> shared(l, std::vector<uint32_t>(n, 0));
  // Report ages are compared in integer milli-units of time.
  const auto ms = [](double t) { return static_cast<uint64_t>(t * 1000.0) + 1; };
  const uint64_t max_age = static_cast<uint64_t>(opt.report_age * 1000.0);

  std::vector<uint64_t> key_hashes(opt.keys);
  for (uint64_t i = 0; i < opt.keys; ++i) key_hashes[i] = key_hash(opt.seed, i);
  ZipfSampler zipf(opt.keys, opt.zipf);
  std::mt19937_64 rng(opt.seed * 0x2545F4914F6CDD1DULL + 17);
  std::mt19937_64 coins(opt.seed + 99);  // the picks' coins, apart so keys replay alike
  const uint64_t warmup = opt.warmup_requests > 0 ? opt.warmup_requests : opt.requests / 5;

  FleetReport r;
  r.reports = reports;
  uint64_t spilled = 0, misses = 0, report_count = 0;
  double age_sum = 0.0;
  const uint32_t fleet_n = opt.fleet_n == 0 ? static_cast<uint32_t>(l) : opt.fleet_n;
  double ratio_sum = 0.0, cap_sum = 0.0, over_sum = 0.0;
  // (time, backend, client)
  using Departure = std::tuple<double, core::BackendIndex, uint32_t>;
  std::priority_queue<Departure, std::vector<Departure>, std::greater<>> departures;

  auto arrive = [&](uint64_t req, uint32_t client, double now) {
    Instance& x = inst[client_instance[client]];
    const uint64_t key = zipf(rng);
    const uint64_t hash = key_hashes[key];
    uint64_t total = 0;
    std::fill(x.rounded.begin(), x.rounded.end(), uint64_t{0});
    for (size_t i = 0; i < n && peers; ++i) {
      // Shared counts (fleet.share_load): the others' last shares, always fresh here.
      core::ReportView v;
      v.local_in_flight = x.local[i];
      v.peers_fresh = true;
      for (size_t k = 0; k < l; ++k) v.peer_in_flight += &inst[k] == &x ? 0 : shared[k][i];
      x.loads[i] = core::effective_load(v, ms(now), max_age, fleet_n);
      total += x.loads[i];
    }
    for (size_t i = 0; i < n && !peers; ++i) {
      core::ReportView v = x.report[i];
      v.local_in_flight = x.local[i];
      if (!reports) v.at_ms = 0;  // never fresh: N * local (the per-instance bound at N = 1)
      if (reports && opt.min_reports > 1) v.at_ms = core::judged_at(x.arrivals[i], opt.min_reports);
      x.loads[i] = core::effective_load(v, ms(now), max_age, fleet_n);
      if (reports && v.at_ms != 0) {
        if (core::report_fresh(v.at_ms, ms(now), max_age)) {
          if (!opt.report_round_up) core::bit_set(x.rounded, i);
          ++r.fresh_reads;
          age_sum += static_cast<double>(ms(now) - std::min(ms(now), v.at_ms)) / 1000.0;
        } else {
          ++r.stale_reads;
        }
      }
      total += x.loads[i];
    }
    core::PickInput in;
    in.loads = x.loads;
    in.weights = weights;
    in.total_in_flight = total;
    in.total_weight = n;
    in.rounded = x.rounded;
    in.grain = peers ? 1 : fleet_n;
    in.coin = coins();
    const core::PickResult p = core::bounded_pick(sel, hash, in, bo, scratch);
    const core::BackendIndex b = p.backend;
    ++x.local[b];
    ++truth[b];
    ++truth_total;
    const bool hit = caches[b].access(static_cast<uint32_t>(key));
    double service = fleet_exponential(rng, opt.mean_service);
    if (!hit) service += opt.miss_delay;
    departures.emplace(now + service, b, client);
    if (req < warmup) return;
    ++r.measured;
    spilled += p.owner != b;
    misses += !hit;
    const uint32_t worst = *std::max_element(truth.begin(), truth.end());
    const double ratio = static_cast<double>(worst) * n / truth_total;
    ratio_sum += ratio;
    r.max_over_mean_peak = std::max(r.max_over_mean_peak, ratio);
    const uint32_t cap = core::capacity(truth_total - 1, 1, n, bo);
    cap_sum += static_cast<double>(worst) / cap;
    uint64_t over = 0;
    for (uint32_t t : truth) over += t > cap ? t - cap : 0;
    over_sum += static_cast<double>(over) / truth_total;
  };

  uint64_t req = 0;
  for (; req < opt.clients && req < opt.requests; ++req) {
    arrive(req, static_cast<uint32_t>(req), 0.0);
  }
  double next_poll = opt.report_poll;
  std::vector<double> next_share(l);
  for (size_t k = 0; k < l; ++k) next_share[k] = opt.peer_share * (1.0 + double(k) / double(l));
  double end_time = 0.0;
  for (; req < opt.requests; ++req) {
    const auto [when, b, client] = departures.top();
    departures.pop();
    end_time = when;
    // Out-of-band polls (health checks) due before this departure: every instance reads every
    // backend's true count.
    while (reports && opt.report_poll > 0 && next_poll <= when) {
      for (Instance& x : inst) {
        for (size_t i = 0; i < n; ++i) x.note(i, {truth[i], ms(next_poll), x.local[i], 0});
      }
      next_poll += opt.report_poll;
    }
    for (size_t k = 0; k < l && peers; ++k) {
      if (next_share[k] <= when) {
        shared[k] = inst[k].local;
        while (next_share[k] <= when) next_share[k] += opt.peer_share;
      }
    }
    Instance& x = inst[client_instance[client]];
    --x.local[b];
    --truth[b];
    --truth_total;
    // The response carries the backend's count, this request excluded, to its instance, which
    // notes its own count of the backend, this request excluded too.
    x.note(b, {truth[b], ms(when), x.local[b], 0});
    ++report_count;
    arrive(req, client, when);
  }
  if (r.measured > 0) {
    const double m = static_cast<double>(r.measured);
    r.max_over_mean = ratio_sum / m;
    r.max_over_cap = cap_sum / m;
    r.over_cap_share = over_sum / m;
    r.spill = spilled / m;
    r.miss_rate = misses / m;
  }
  if (r.fresh_reads > 0) r.mean_report_age = age_sum / static_cast<double>(r.fresh_reads);
  if (end_time > 0) r.reports_per_backend = report_count / (end_time * n * l);
  return r;
}

namespace {

struct AgreementCtx {
  size_t eligible;
  uint32_t scale;
};
size_t agreement_eligible(const void* c) noexcept {
  return static_cast<const AgreementCtx*>(c)->eligible;
}
uint32_t agreement_scale(const void* c) noexcept {
  return static_cast<const AgreementCtx*>(c)->scale;
}

}  // namespace

core::Result<HotAgreementReport> run_hot_agreement(const SimOptions& opt, uint32_t scale) {
  if (opt.fleet_split.empty()) return core::fail("--hot-agreement needs --fleet-split");
  if (opt.hot_share == 0) return core::fail("--hot-agreement needs --hot-share PCT");
  if (opt.arrival_rate <= 0) return core::fail("--hot-agreement needs --arrival-rate > 0");
  core::RoutePolicyOptions po;
  po.hot_share_pct = opt.hot_share;
  po.hot_capacity = opt.hot_capacity;
  po.hot_window_ms = static_cast<uint64_t>(opt.hot_window);
  po.max_replicas = opt.max_replicas;
  po.min_count = opt.min_count;
  std::vector<core::RoutePolicy> inst;
  for (size_t k = 0; k < opt.fleet_split.size(); ++k) inst.emplace_back(po);
  const AgreementCtx ctx{opt.backends, scale};
  const core::EligibleCounter counter{&agreement_eligible, &ctx, &agreement_scale};
  std::vector<uint64_t> cum;
  uint64_t sum = 0;
  for (uint32_t s : opt.fleet_split) cum.push_back(sum += s);
  std::vector<uint64_t> key_hashes(opt.keys);
  for (uint64_t i = 0; i < opt.keys; ++i) key_hashes[i] = key_hash(opt.seed, i);
  ZipfSampler zipf(opt.keys, opt.zipf);
  std::mt19937_64 rng(opt.seed * 0x9E3779B97F4A7C15ULL + 5);
  // Each key's share of the requests (Zipf: 1/rank^s normalized), to weigh agreement by traffic.
  std::unordered_map<uint64_t, double> share_of;
  {
    double norm = 0.0;
    for (uint64_t i = 0; i < opt.keys; ++i) norm += std::pow(static_cast<double>(i + 1), -opt.zipf);
    for (uint64_t i = 0; i < opt.keys; ++i) {
      share_of[key_hashes[i]] = std::pow(static_cast<double>(i + 1), -opt.zipf) / norm;
    }
  }
  const uint64_t quarter = std::max<uint64_t>(po.hot_window_ms / 4, 1);
  uint64_t next_check = 2 * po.hot_window_ms + quarter;
  HotAgreementReport r;
  std::vector<uint64_t> hot;
  for (uint64_t i = 0; i < opt.requests; ++i) {
    const uint64_t now_ms = static_cast<uint64_t>(static_cast<double>(i) * 1000.0 / opt.arrival_rate);
    if (now_ms >= next_check) {
      next_check += quarter;
      // Every instance's table as of now (each rebuilds on its own schedule, as daemons do).
      hot.clear();
      for (const core::RoutePolicy& p : inst) {
        for (const core::HotKeyReplicas& h : p.hot()) hot.push_back(h.hash);
      }
      std::sort(hot.begin(), hot.end());
      hot.erase(std::unique(hot.begin(), hot.end()), hot.end());
      bool all = true;
      for (uint64_t h : hot) {
        const uint32_t first = inst[0].replicas(h);
        bool same = true;
        for (const core::RoutePolicy& p : inst) same = same && p.replicas(h) == first;
        ++r.keys_compared;
        r.keys_agreed += same;
        const double w = share_of.count(h) ? share_of[h] : 0.0;
        r.share_compared += w;
        if (same) r.share_agreed += w;
        all = all && same;
      }
      ++r.checks;
      r.checks_agreed += all;
    }
    const uint64_t key = zipf(rng);
    const uint64_t pick = rng() % sum;
    const size_t k = static_cast<size_t>(std::upper_bound(cum.begin(), cum.end(), pick) - cum.begin());
    inst[k].observe(key_hashes[key], {}, now_ms, core::PickKind::kFirst, core::Affinity::kKey,
                    counter);
  }
  return r;
}

}  // namespace rondel::sim
