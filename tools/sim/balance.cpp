// Measures balance, churn movement, memory, build time and lookup time of one placement.
#include "balance.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <random>
#include <string>

#include "placement.h"
#include "rondel/core/hash.h"
#include "zipf.h"

namespace rondel::sim {
namespace {

// Returns the median of `v` (the mean of the two middle values for an even count).
double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

// Returns the base pool of opt.backends backends, globals 0..N-1.
std::vector<SimBackend> base_pool(const SimOptions& opt) {
  std::vector<SimBackend> pool;
  for (uint32_t g = 0; g < opt.backends; ++g) {
    pool.push_back(make_backend(g, opt.weights.empty() ? 1 : opt.weights[g]));
  }
  return pool;
}

// Counts keys whose owner under `p` differs from `before`; a key that moves is "stray" unless
// `is_expected(old_owner, new_owner)` holds.
template <class Expected>
void count_moves(const Placement& p, const std::vector<uint64_t>& hashes,
                 const std::vector<uint32_t>& before, Expected is_expected, uint64_t& moved,
                 uint64_t& stray) {
  moved = 0;
  stray = 0;
  for (size_t i = 0; i < hashes.size(); ++i) {
    uint32_t now = p.owner_global(hashes[i]);
    if (now != before[i]) {
      ++moved;
      if (!is_expected(before[i], now)) ++stray;
    }
  }
}

// Fills the summary fields of `m` from per-trial moved fractions.
void summarize(Movement& m, const std::vector<double>& moved, const std::vector<double>& ideal,
               uint64_t keys) {
  m.trials = static_cast<uint32_t>(moved.size());
  if (moved.empty()) return;
  m.moved_mean = std::accumulate(moved.begin(), moved.end(), 0.0) / moved.size();
  m.moved_min = *std::min_element(moved.begin(), moved.end());
  m.moved_max = *std::max_element(moved.begin(), moved.end());
  m.ideal = std::accumulate(ideal.begin(), ideal.end(), 0.0) / ideal.size();
  m.error = m.ideal > 0 ? std::fabs(m.moved_mean - m.ideal) / m.ideal : 0.0;
  m.stray_share = static_cast<double>(m.stray_keys) / (static_cast<double>(keys) * moved.size());
}

// Returns the coefficient of variation (population standard deviation / mean) of `v`.
double coefficient_of_variation(const std::vector<double>& v) {
  double mean = std::accumulate(v.begin(), v.end(), 0.0) / v.size();
  double var = 0.0;
  for (double x : v) var += (x - mean) * (x - mean);
  var /= v.size();
  return mean > 0 ? std::sqrt(var) / mean : 0.0;
}

}  // namespace

uint64_t key_hash(uint64_t seed, uint64_t i) {
  std::string key = "/obj/" + std::to_string(seed) + "/" + std::to_string(i);
  return core::hash64(key);
}

core::Result<BalanceReport> run_balance(const SimOptions& opt) {
  BalanceReport r;
  const uint32_t n = opt.backends;
  std::vector<SimBackend> pool = base_pool(opt);
  r.backends = n;
  r.uniform_weights = opt.weights.empty() ||
                      std::all_of(opt.weights.begin(), opt.weights.end(),
                                  [&](uint32_t w) { return w == opt.weights[0]; });
  for (const SimBackend& b : pool) r.total_weight += b.spec.weight;

  // Build (timed several times; the last build is the one measured).
  std::vector<double> build_ms;
  core::Result<Placement> base = core::fail("not built");
  for (uint32_t rep = 0; rep < std::max<uint32_t>(3, opt.lookup_reps); ++rep) {
    base = Placement::build(opt.algo, pool, opt);
    if (!base) return base.error();
    build_ms.push_back(base->build_seconds() * 1e3);
  }
  r.build_ms = opt.algo == AlgoChoice::kJump ? 0.0 : median(build_ms);
  if (const core::Selector* sel = base->selector()) {
    r.memory_bytes = sel->memory_bytes();
    r.points = sel->points();
    r.bytes_per_point = r.points ? static_cast<double>(r.memory_bytes) / r.points : 0.0;
  }

  std::vector<uint64_t> hashes(opt.keys);
  for (uint64_t i = 0; i < opt.keys; ++i) hashes[i] = key_hash(opt.seed, i);
  std::vector<double> popularity = zipf_weights(opt.keys, opt.zipf);

  // Balance: load per backend (popularity-weighted), normalized by weight share.
  std::vector<uint32_t> before(opt.keys);
  std::vector<double> load(n, 0.0);
  for (uint64_t i = 0; i < opt.keys; ++i) {
    before[i] = base->owner_global(hashes[i]);
    load[before[i]] += popularity[i];
  }
  std::vector<double> normalized(n);
  for (uint32_t g = 0; g < n; ++g) {
    double fair = static_cast<double>(pool[g].spec.weight) / r.total_weight;
    normalized[g] = load[g] / fair;  // Mean over backends is 1 when weights are equal.
  }
  double avg = std::accumulate(normalized.begin(), normalized.end(), 0.0) / n;
  r.max_over_avg = *std::max_element(normalized.begin(), normalized.end()) / avg;
  r.min_over_avg = *std::min_element(normalized.begin(), normalized.end()) / avg;
  r.cv_keys = coefficient_of_variation(normalized);
  if (const core::Selector* sel = base->selector()) {
    std::vector<double> shares = sel->key_shares();
    const std::vector<uint32_t>& globals = base->global_of_index();
    std::vector<double> space(n);
    for (size_t i = 0; i < shares.size() && i < globals.size(); ++i) {
      space[globals[i]] = shares[i] * r.total_weight / pool[globals[i]].spec.weight;
    }
    r.cv_space = coefficient_of_variation(space);
  }
  if (opt.algo == AlgoChoice::kRing && r.uniform_weights) {
    // Karger et al. 1997: with k points per backend the arc lengths have this CV.
    double k = static_cast<double>(opt.points) * (opt.weights.empty() ? 1 : opt.weights[0]);
    r.cv_theory = std::sqrt((n - 1.0) / (n * k + 1.0));
    r.cv_theory_error = std::fabs(r.cv_keys - r.cv_theory) / r.cv_theory;
  }

  // Churn: add one new backend (weight 1) per trial; jump can only add bucket N.
  std::mt19937_64 rng(opt.seed ^ 0x9e3779b97f4a7c15ULL);
  uint32_t trials = opt.algo == AlgoChoice::kJump ? std::min<uint32_t>(opt.churn_trials, 1)
                                                  : std::min(opt.churn_trials, n);
  std::vector<double> moved_frac, ideal;
  for (uint32_t t = 0; t < trials; ++t) {
    std::vector<SimBackend> grown = pool;
    uint32_t fresh = n + t;
    grown.push_back(make_backend(fresh, 1));
    auto p = Placement::build(opt.algo, grown, opt);
    if (!p) return p.error();
    uint64_t moved = 0, stray = 0;
    count_moves(*p, hashes, before, [&](uint32_t, uint32_t now) { return now == fresh; }, moved,
                stray);
    r.add.stray_keys += stray;
    moved_frac.push_back(static_cast<double>(moved) / opt.keys);
    ideal.push_back(1.0 / (r.total_weight + 1.0));
  }
  summarize(r.add, moved_frac, ideal, opt.keys);

  // Churn: remove one backend per trial (distinct ones); jump can only remove the last bucket.
  moved_frac.clear();
  ideal.clear();
  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  std::shuffle(order.begin(), order.end(), rng);
  if (opt.algo == AlgoChoice::kJump) order.assign(1, n - 1);
  for (uint32_t t = 0; t < trials && n > 1; ++t) {
    uint32_t gone = order[t];
    std::vector<SimBackend> shrunk;
    for (const SimBackend& b : pool) {
      if (b.global != gone) shrunk.push_back(b);
    }
    auto p = Placement::build(opt.algo, shrunk, opt);
    if (!p) return p.error();
    uint64_t moved = 0, stray = 0;
    count_moves(*p, hashes, before, [&](uint32_t old, uint32_t) { return old == gone; }, moved,
                stray);
    r.remove.stray_keys += stray;
    moved_frac.push_back(static_cast<double>(moved) / opt.keys);
    ideal.push_back(static_cast<double>(pool[gone].spec.weight) / r.total_weight);
  }
  summarize(r.remove, moved_frac, ideal, opt.keys);

  // Lookup time: mean owner() cost over up to 2^20 keys, median over repetitions.
  size_t probe_keys = std::min<size_t>(hashes.size(), size_t{1} << 20);
  uint64_t sink = 0;
  for (uint32_t rep = 0; rep < opt.lookup_reps; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    for (size_t i = 0; i < probe_keys; ++i) sink += base->owner_index(hashes[i]);
    auto t1 = std::chrono::steady_clock::now();
    r.lookup_ns_reps.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() /
                               probe_keys);
  }
  r.lookup_ns = median(r.lookup_ns_reps);
  volatile uint64_t keep = sink;  // Keeps the timed lookups observable to the optimizer.
  (void)keep;
  return r;
}

}  // namespace rondel::sim
