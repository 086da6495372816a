// rondel-microbench, label subsets (core/subset.h): owner lookup within a subset on one ring
// against a ring built for that subset alone, and the memory of one ring plus a bitset per
// subset against one ring per label combination (computed from the ring's point budget, not
// built: at k = 12 that is 4096 rings). 1,000 backends, daemon ring defaults (4096 points per
// weight, 2^20-point budget); each backend carries each of k labels with probability 1/2.
#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "rondel/core/backend_set.h"
#include "rondel/core/bitset.h"
#include "rondel/core/bounded.h"
#include "rondel/core/hash.h"
#include "rondel/core/selector.h"
#include "rondel/core/subset.h"

namespace rondel::bench {
namespace {

constexpr int64_t kFleet = 1000;
constexpr size_t kHashes = 4096;

struct LabelledFleet {
  core::BackendSet set;
  std::vector<core::LabelMask> labels;
};

LabelledFleet make_fleet(int k) {
  std::mt19937_64 rng(1000 + k);
  std::vector<core::BackendSpec> specs;
  std::vector<core::LabelMask> labels;
  for (int64_t i = 0; i < kFleet; ++i) {
    specs.push_back({"node-" + std::to_string(i), 1});
    labels.push_back(rng() & ((core::LabelMask{1} << k) - 1));
  }
  return {std::move(*core::BackendSet::create(std::move(specs))), std::move(labels)};
}

core::SelectorOptions daemon_ring() {
  core::SelectorOptions o;
  o.points_per_weight = 4096;
  o.max_points = 1u << 20;
  return o;
}

// Ring points for m backends of weight 1 under the daemon defaults (core/ring.h's layout).
uint64_t ring_points(uint64_t m) {
  const uint64_t want = m * 4096, cap = 1u << 20;
  return want <= cap ? want : m * std::max<uint64_t>(1, cap / m);
}

std::vector<uint64_t> hashes() {
  std::vector<uint64_t> h(kHashes);
  for (size_t i = 0; i < kHashes; ++i) h[i] = core::hash64("/obj/" + std::to_string(i));
  return h;
}

// Args: k labels, s required labels (labels 0 .. s-1).
void bm_subset_one_ring(benchmark::State& state) {
  const int k = static_cast<int>(state.range(0)), s = static_cast<int>(state.range(1));
  const LabelledFleet f = make_fleet(k);
  const core::Selector sel = std::move(*core::Selector::build(f.set, daemon_ring()));
  const core::Subset sub = core::Subset::build(f.set, f.labels, (core::LabelMask{1} << s) - 1);
  std::vector<uint64_t> scratch(sel.scratch_words());
  const std::vector<uint64_t> h = hashes();
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(core::subset_owner(sel, h[i++ & (kHashes - 1)], sub, scratch));
  }
  // Memory: one ring plus one bitset per combination (every one of the 2^k used) against one
  // ring per combination, each sized by its members.
  uint64_t per_combo = 0;
  for (core::LabelMask r = 0; r < (core::LabelMask{1} << k); ++r) {
    uint64_t m = 0;
    for (core::LabelMask l : f.labels) m += (l & r) == r;
    per_combo += m > 0 ? 6 * ring_points(m) : 0;
  }
  state.counters["members"] = static_cast<double>(sub.size());
  state.counters["one_ring_MB"] =
      static_cast<double>(sel.memory_bytes() + (uint64_t{1} << k) * sub.memory_bytes()) / 1e6;
  state.counters["ring_per_combo_MB"] = static_cast<double>(per_combo) / 1e6;
}

// The same lookups on a ring built from the subset's members alone.
void bm_subset_own_ring(benchmark::State& state) {
  const int k = static_cast<int>(state.range(0)), s = static_cast<int>(state.range(1));
  const LabelledFleet f = make_fleet(k);
  const core::Subset sub = core::Subset::build(f.set, f.labels, (core::LabelMask{1} << s) - 1);
  std::vector<core::BackendSpec> specs;
  for (size_t i = 0; i < f.set.size(); ++i) {
    if (sub.contains(static_cast<core::BackendIndex>(i))) specs.push_back(f.set.specs()[i]);
  }
  const core::BackendSet own = std::move(*core::BackendSet::create(std::move(specs)));
  const core::Selector sel = std::move(*core::Selector::build(own, daemon_ring()));
  const std::vector<uint64_t> h = hashes();
  size_t i = 0;
  for (auto _ : state) benchmark::DoNotOptimize(sel.owner(h[i++ & (kHashes - 1)]));
  state.counters["members"] = static_cast<double>(sub.size());
}

// The daemon's pick within a subset (Router::route): restrict_to_subset over the pool's pick
// input, then the bounded pick, against the bounded pick over the whole pool. Args as above,
// plus a third: 1 = restricted to the subset, 0 = the whole pool (the reference).
void bm_subset_bounded_pick(benchmark::State& state) {
  const int k = static_cast<int>(state.range(0)), s = static_cast<int>(state.range(1));
  const bool restricted = state.range(2) != 0;
  const LabelledFleet f = make_fleet(k);
  const core::Selector sel = std::move(*core::Selector::build(f.set, daemon_ring()));
  const core::Subset sub = core::Subset::build(f.set, f.labels, (core::LabelMask{1} << s) - 1);
  std::vector<std::atomic<uint32_t>> in_flight(f.set.size());
  std::vector<uint32_t> weights(f.set.size(), 1);
  std::mt19937_64 rng(7);
  uint64_t total = 0;
  for (auto& a : in_flight) {
    a.store(static_cast<uint32_t>(rng() % 4), std::memory_order_relaxed);
    total += a.load(std::memory_order_relaxed);
  }
  std::vector<uint64_t> excluded(core::bitset_words(f.set.size()));
  std::vector<uint64_t> scratch(core::pick_scratch_words(sel));
  const core::BoundedOptions opt;
  const std::vector<uint64_t> h = hashes();
  size_t i = 0;
  for (auto _ : state) {
    core::PickInput in;
    in.in_flight = in_flight;
    in.weights = weights;
    in.total_in_flight = total;
    in.total_weight = f.set.size();
    if (restricted) core::restrict_to_subset(sub, in, excluded);
    benchmark::DoNotOptimize(core::bounded_pick(sel, h[i++ & (kHashes - 1)], in, opt, scratch));
  }
  state.counters["members"] = static_cast<double>(sub.size());
}

void subset_args(benchmark::internal::Benchmark* b) {
  for (auto [k, s] : {std::pair{4, 1}, {4, 4}, {8, 1}, {8, 4}, {8, 8}, {12, 1}, {12, 4}, {12, 6}}) {
    b->Args({k, s});
  }
  b->ArgNames({"k", "s"});
}

}  // namespace
}  // namespace rondel::bench

BENCHMARK(rondel::bench::bm_subset_one_ring)
    ->Name("subset/one_ring")
    ->Apply(rondel::bench::subset_args);
BENCHMARK(rondel::bench::bm_subset_own_ring)
    ->Name("subset/own_ring")
    ->Apply(rondel::bench::subset_args);
BENCHMARK(rondel::bench::bm_subset_bounded_pick)
    ->Name("subset/bounded_pick")
    ->Apply([](benchmark::internal::Benchmark* b) {
      for (auto [k, s] : {std::pair{8, 1}, {8, 4}, {12, 6}}) {
        b->Args({k, s, 0});
        b->Args({k, s, 1});
      }
      b->ArgNames({"k", "s", "subset"});
    });
