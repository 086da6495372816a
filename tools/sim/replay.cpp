// Replays a Poisson request stream through bounded_pick and checks the cap on every pick.
//
// Requests arrive with exponential inter-arrival times (rate L), draw a key from Zipf(S) over
// M keys and leave after an exponential service time (mean T); departures sit in a min-heap.
// At each arrival every departure due by then is applied first, then bounded_pick sees the
// current in-flight counts, exactly as the data path would. All randomness comes from one
// seeded mt19937_64 and inverse-CDF transforms, so a run is reproducible on any platform.
#include "replay.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <functional>
#include <memory>
#include <queue>
#include <random>
#include <utility>
#include <vector>

#include "balance.h"
#include "placement.h"
#include "rondel/core/bounded.h"
#include "zipf.h"

namespace rondel::sim {
namespace {

// Draws an exponential variate of the given mean from 53 random bits.
double exponential(std::mt19937_64& rng, double mean) {
  double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;  // [0, 1)
  return -std::log1p(-u) * mean;
}

// MaxTracker keeps max_i in_flight_i in O(1) per change for equal weights (a histogram of
// counts); with unequal weights it scans the normalized loads (O(N) per query).
class MaxTracker {
 public:
  MaxTracker(size_t n, bool uniform) : uniform_(uniform), hist_(1, n) {}

  void increment(uint32_t old_value) {
    if (!uniform_) return;
    if (hist_.size() <= old_value + 1) hist_.resize(old_value + 2, 0);
    --hist_[old_value];
    ++hist_[old_value + 1];
    max_ = std::max(max_, old_value + 1);
  }

  void decrement(uint32_t old_value) {
    if (!uniform_) return;
    --hist_[old_value];
    ++hist_[old_value - 1];
    while (max_ > 0 && hist_[max_] == 0) --max_;
  }

  // Returns max_i in_flight_i * W / w_i (equal to max_i in_flight_i * N for equal weights).
  double max_scaled(const std::unique_ptr<std::atomic<uint32_t>[]>& in_flight,
                    const std::vector<uint32_t>& weights, uint64_t total_weight) const {
    if (uniform_) return static_cast<double>(max_) * weights.size();
    double best = 0.0;
    for (size_t i = 0; i < weights.size(); ++i) {
      double v = static_cast<double>(in_flight[i].load(std::memory_order_relaxed)) *
                 total_weight / weights[i];
      best = std::max(best, v);
    }
    return best;
  }

 private:
  bool uniform_;
  std::vector<uint64_t> hist_;
  uint32_t max_ = 0;
};

}  // namespace

core::Result<ReplayReport> run_replay(const SimOptions& opt) {
  auto wall0 = std::chrono::steady_clock::now();
  ReplayReport r;
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
  for (size_t i = 0; i < n; ++i) weights[i] = set[static_cast<core::BackendIndex>(i)].weight;
  const uint64_t total_weight = set.total_weight();
  const bool uniform = std::all_of(weights.begin(), weights.end(),
                                   [&](uint32_t w) { return w == weights[0]; });

  auto in_flight = std::make_unique<std::atomic<uint32_t>[]>(n);
  for (size_t i = 0; i < n; ++i) in_flight[i].store(0, std::memory_order_relaxed);
  std::vector<uint64_t> excluded((n + 63) / 64, 0);
  std::vector<uint64_t> scratch(std::max<size_t>(core::pick_scratch_words(sel), 1));
  std::vector<core::BackendIndex> pref(n);
  std::vector<uint64_t> spill_received(n, 0);

  core::BoundedOptions bo;
  bo.balance_factor = opt.balance_factor;
  bo.probe = opt.probe;
  const bool bounded = opt.balance_factor != 0;

  std::vector<uint64_t> key_hashes(opt.keys);
  for (uint64_t i = 0; i < opt.keys; ++i) key_hashes[i] = key_hash(opt.seed, i);
  ZipfSampler zipf(opt.keys, opt.zipf);
  std::mt19937_64 rng(opt.seed * 0x2545F4914F6CDD1DULL + 7);

  using Departure = std::pair<double, core::BackendIndex>;
  std::priority_queue<Departure, std::vector<Departure>, std::greater<>> departures;
  MaxTracker tracker(n, uniform);
  uint64_t total = 0;
  double now = 0.0, last_event = 0.0, area = 0.0;
  const double warmup = 5.0 * opt.mean_service;
  uint64_t spilled = 0, spilled_to_successor = 0, hops_sum = 0;
  double ratio_sum = 0.0;

  auto depart_until = [&](double t) {
    while (!departures.empty() && departures.top().first <= t) {
      auto [when, b] = departures.top();
      departures.pop();
      area += static_cast<double>(total) * (when - last_event);
      last_event = when;
      uint32_t old = in_flight[b].fetch_sub(1, std::memory_order_relaxed);
      tracker.decrement(old);
      --total;
    }
  };

  for (uint64_t req = 0; req < opt.requests; ++req) {
    now += exponential(rng, 1.0 / opt.arrival_rate);
    depart_until(now);
    area += static_cast<double>(total) * (now - last_event);
    last_event = now;
    uint64_t hash = key_hashes[zipf(rng)];

    core::BackendIndex chosen, owner;
    uint32_t hops = 0;
    if (bounded) {
      core::PickInput in;
      in.in_flight = std::span<const std::atomic<uint32_t>>(in_flight.get(), n);
      in.weights = weights;
      in.total_in_flight = total;
      in.total_weight = total_weight;
      in.excluded = excluded;
      core::PickResult pr = core::bounded_pick(sel, hash, in, bo, scratch);
      chosen = pr.backend;
      owner = pr.owner;
      hops = pr.skipped_full;
      if (pr.all_full) ++r.all_full;
      // Independent check of the cap against the capacity formula.
      uint32_t cap = core::capacity(total, weights[chosen], total_weight, bo);
      if (pr.capacity != cap) ++r.capacity_mismatches;
      uint32_t after = in_flight[chosen].load(std::memory_order_relaxed) + 1;
      r.max_cap_ratio = std::max(r.max_cap_ratio, static_cast<double>(after) / cap);
      bool some_room = false;
      if (after > cap || pr.all_full) {
        for (size_t i = 0; i < n && !some_room; ++i) {
          some_room = in_flight[i].load(std::memory_order_relaxed) <
                      core::capacity(total, weights[i], total_weight, bo);
        }
      }
      if (after > cap && some_room) ++r.cap_violations;
      if (pr.all_full && some_room) ++r.false_all_full;
      if (opt.probe == core::ProbeOrder::kClockwise && !pr.all_full) {
        size_t got = sel.preference(hash, std::span(pref.data(), std::min<size_t>(hops + 1, n)));
        bool ok = got == hops + 1 && pref[hops] == chosen;
        for (size_t j = 0; ok && j < hops; ++j) {
          ok = in_flight[pref[j]].load(std::memory_order_relaxed) >=
               core::capacity(total, weights[pref[j]], total_weight, bo);
        }
        if (!ok) ++r.order_violations;
      }
    } else {
      chosen = owner = sel.owner(hash);
    }

    uint32_t old = in_flight[chosen].fetch_add(1, std::memory_order_relaxed);
    tracker.increment(old);
    ++total;
    departures.emplace(now + exponential(rng, opt.mean_service), chosen);

    if (now < warmup) continue;
    ++r.measured;
    hops_sum += hops;
    r.max_hops = std::max(r.max_hops, hops);
    double ratio = tracker.max_scaled(in_flight, weights, total_weight) / total;
    ratio_sum += ratio;
    r.peak_max_over_avg = std::max(r.peak_max_over_avg, ratio);
    if (chosen != owner) {
      ++spilled;
      ++spill_received[chosen];
      if (sel.preference(hash, std::span(pref.data(), std::min<size_t>(2, n))) >= 2 &&
          pref[1] == chosen) {
        ++spilled_to_successor;
      }
    }
  }

  r.requests = opt.requests;
  r.offered_in_flight = opt.arrival_rate * opt.mean_service;
  r.mean_in_flight = last_event > 0 ? area / last_event : 0.0;
  if (r.measured > 0) {
    r.mean_max_over_avg = ratio_sum / r.measured;
    r.spill_share = static_cast<double>(spilled) / r.measured;
    r.mean_hops = static_cast<double>(hops_sum) / r.measured;
  }
  if (spilled > 0) {
    r.spill_to_successor = static_cast<double>(spilled_to_successor) / spilled;
    double mean_received = static_cast<double>(spilled) / n;
    r.spill_max_over_avg =
        *std::max_element(spill_received.begin(), spill_received.end()) / mean_received;
  }
  r.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  return r;
}

}  // namespace rondel::sim
