// route_pick: identical to bounded_pick by default; stable spill, hysteresis and hot-key
// replicas; caps hold under random load sequences. Guards the "Routing quality" issue.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <random>
#include <vector>

#include "core_test_util.h"
#include "rondel/core/bitset.h"
#include "rondel/core/bounded.h"
#include "rondel/core/spill_memory.h"

namespace rondel::core {
namespace {

using test::make_selector;
using test::make_set;
using test::name;

// A simulated load: in-flight counters, effective weights and a down set.
struct Load {
  explicit Load(const BackendSet& set)
      : in_flight(set.size()), weights(set.size()), down(bitset_words(set.size()), 0) {
    for (size_t i = 0; i < set.size(); ++i) weights[i] = set[static_cast<BackendIndex>(i)].weight;
  }
  PickInput input() const {
    PickInput in;
    in.in_flight = in_flight;
    in.weights = weights;
    for (size_t i = 0; i < in_flight.size(); ++i) {
      in.total_in_flight += in_flight[i].load(std::memory_order_relaxed);
      if (!bit_test(down, i)) in.total_weight += weights[i];
    }
    in.excluded = down;
    return in;
  }
  void set(BackendIndex b, uint32_t v) { in_flight[b].store(v, std::memory_order_relaxed); }
  std::vector<std::atomic<uint32_t>> in_flight;
  std::vector<uint32_t> weights;
  std::vector<uint64_t> down;
};

RouteOptions route_opts(uint32_t bf, uint32_t slack, ProbeOrder p, uint32_t hysteresis = 0) {
  RouteOptions o;
  o.bounded.balance_factor = bf;
  o.bounded.slack = slack;
  o.bounded.probe = p;
  o.hysteresis = hysteresis;
  return o;
}

bool same(const PickResult& a, const PickResult& b) {
  return a.backend == b.backend && a.owner == b.owner && a.skipped_full == b.skipped_full &&
         a.skipped_excluded == b.skipped_excluded && a.all_full == b.all_full &&
         a.capacity == b.capacity;
}

TEST_CASE("SpillMemory stores, finds, erases and invalidates by key hash") {
  SpillMemory m(1000);
  CHECK(m.entries() == 1024);
  const uint64_t a = 0x1234567800000005ull;
  const uint64_t b = 0x8765432100000005ull;  // same slot, different tag
  CHECK(m.find(a) == kNoBackend);
  m.store(a, 3);
  CHECK(m.find(a) == 3);
  CHECK(m.find(b) == kNoBackend);
  m.erase(b);  // not the key held by the slot: no effect
  CHECK(m.find(a) == 3);
  m.store(b, 7);  // collision: overwrites
  CHECK(m.find(a) == kNoBackend);
  CHECK(m.find(b) == 7);
  CHECK(m.live() == 1);
  m.invalidate();
  CHECK(m.find(b) == kNoBackend);
  CHECK(m.live() == 0);
  for (int i = 0; i < 70000; ++i) m.invalidate();  // epoch wraps: still empty, still works
  CHECK(m.find(b) == kNoBackend);
  m.store(a, 2);
  CHECK(m.find(a) == 2);
  m.erase(a);
  CHECK(m.find(a) == kNoBackend);
}

TEST_CASE("route_pick with default options and no memory is bounded_pick") {
  std::vector<BackendSpec> specs = test::specs(10, {1, 2, 3});
  specs[4].weight = 0;
  const BackendSet set = make_set(specs);
  std::mt19937_64 rng(99);
  for (Algorithm algo : test::kAllAlgorithms) {
    const Selector sel = make_selector(set, algo);
    std::vector<uint64_t> scratch(pick_scratch_words(sel));
    for (ProbeOrder probe : {ProbeOrder::kClockwise, ProbeOrder::kRandom}) {
      for (uint32_t bf : {0u, 110u, 125u, 200u}) {
        CAPTURE(name(algo));
        CAPTURE(bf);
        const RouteOptions o = route_opts(bf, bf == 110 ? 2 : 0, probe);
        Load load(set);
        for (int i = 0; i < 2000; ++i) {
          for (size_t b = 0; b < 10; ++b) load.set(static_cast<BackendIndex>(b), rng() % 8);
          std::fill(load.down.begin(), load.down.end(), 0);
          if (rng() % 4 == 0) bit_set(load.down, rng() % 10);
          const uint64_t h = rng();
          const PickInput in = load.input();
          const PickResult want = bounded_pick(sel, h, in, o.bounded, scratch);
          const RouteResult got = route_pick(sel, h, in, o, RouteRequest{}, nullptr, scratch);
          REQUIRE(same(want, got.pick));
          REQUIRE(got.replicas == 1);
          if (want.backend != kNoBackend && !want.all_full) {
            REQUIRE((got.reason == RouteReason::kHome) == (want.skipped_full == 0));
            if (got.reason == RouteReason::kHome) REQUIRE(got.home == want.backend);
          }
        }
      }
    }
  }
}

TEST_CASE("stable spill: a spilled key stays on its remembered backend while home is busy") {
  const BackendSet set = make_set(test::specs(6));
  const Selector sel = make_selector(set, Algorithm::kRing);
  std::vector<uint64_t> scratch(pick_scratch_words(sel));
  const uint64_t h = test::key_hash(42);
  std::vector<BackendIndex> order(6);
  REQUIRE(sel.preference(h, order) == 6);
  const BackendIndex home = order[0];
  Load load(set);
  // 6 backends, 5 each in flight except home: total 30 + home; c = 1.25.
  for (BackendIndex b = 0; b < 6; ++b) load.set(b, 5);
  const RouteOptions o = route_opts(125, 0, ProbeOrder::kClockwise, /*hysteresis=*/2);
  SpillMemory mem(64);
  load.set(home, 9);  // cap = ceil(1.25 * 35 / 6) = 8: home is full
  RouteResult r = route_pick(sel, h, load.input(), o, RouteRequest{}, &mem, scratch);
  CHECK(r.home == home);
  CHECK(r.reason == RouteReason::kSpill);
  CHECK(r.pick.backend == order[1]);
  CHECK(mem.find(h) == order[1]);
  // Make order[2] the remembered one (as after a walk under other loads): while home is full
  // or within the hysteresis margin, the key stays there even though order[1] has room.
  mem.store(h, order[2]);
  r = route_pick(sel, h, load.input(), o, RouteRequest{}, &mem, scratch);
  CHECK(r.reason == RouteReason::kSticky);
  CHECK(r.pick.backend == order[2]);
  load.set(home, 6);  // total 31: cap = ceil(1.25 * 32 / 6) = 7; 6 + 2 >= 7: still busy
  r = route_pick(sel, h, load.input(), o, RouteRequest{}, &mem, scratch);
  CHECK(r.reason == RouteReason::kSticky);
  CHECK(r.pick.backend == order[2]);
  // Without hysteresis the key would go home right away (home has room).
  SpillMemory mem0(64);
  mem0.store(h, order[2]);
  r = route_pick(sel, h, load.input(), route_opts(125, 0, ProbeOrder::kClockwise), RouteRequest{},
                 &mem0, scratch);
  CHECK(r.reason == RouteReason::kHome);
  CHECK(mem0.find(h) == kNoBackend);
  // Home drops below cap - hysteresis: back home, memory forgotten.
  load.set(home, 4);  // total 29: cap = ceil(1.25 * 30 / 6) = 7; 4 + 2 < 7
  r = route_pick(sel, h, load.input(), o, RouteRequest{}, &mem, scratch);
  CHECK(r.reason == RouteReason::kHome);
  CHECK(r.pick.backend == home);
  CHECK(mem.find(h) == kNoBackend);
  // The remembered backend full while home is busy: walk again (first with room), remember it.
  mem.store(h, order[2]);
  load.set(home, 9);
  load.set(order[2], 9);
  r = route_pick(sel, h, load.input(), o, RouteRequest{}, &mem, scratch);
  CHECK(r.reason == RouteReason::kSpill);
  CHECK(r.pick.backend == order[1]);
  CHECK(mem.find(h) == order[1]);
  // The remembered backend goes down: stale entry dropped, normal walk.
  mem.store(h, order[3]);
  bit_set(load.down, order[3]);
  load.set(home, 0);
  r = route_pick(sel, h, load.input(), o, RouteRequest{}, &mem, scratch);
  CHECK(r.pick.backend == home);
  CHECK(mem.find(h) == kNoBackend);
}

TEST_CASE("hot-key replicas: least loaded of the first R eligible, home on ties, overflow") {
  const BackendSet set = make_set(test::specs(8));
  for (Algorithm algo : test::kAllAlgorithms) {
    CAPTURE(name(algo));
    const Selector sel = make_selector(set, algo);
    std::vector<uint64_t> scratch(pick_scratch_words(sel));
    const uint64_t h = test::key_hash(7);
    std::vector<BackendIndex> order(8);
    REQUIRE(sel.preference(h, order) == 8);
    Load load(set);
    for (BackendIndex b = 0; b < 8; ++b) load.set(b, 4);
    const RouteOptions o = route_opts(125, 0, ProbeOrder::kClockwise);
    RouteRequest rq;
    rq.replicas = 3;
    RouteResult r = route_pick(sel, h, load.input(), o, rq, nullptr, scratch);
    CHECK(r.pick.backend == order[0]);  // all equal: home
    CHECK(r.reason == RouteReason::kHome);
    CHECK(r.replicas == 3);
    load.set(order[2], 2);
    r = route_pick(sel, h, load.input(), o, rq, nullptr, scratch);
    CHECK(r.pick.backend == order[2]);
    CHECK(r.reason == RouteReason::kReplica);
    load.set(order[5], 0);  // beyond R: not a candidate
    r = route_pick(sel, h, load.input(), o, rq, nullptr, scratch);
    CHECK(r.pick.backend == order[2]);
    // Home down: the candidates are the next three eligible.
    bit_set(load.down, order[0]);
    load.set(order[3], 1);
    r = route_pick(sel, h, load.input(), o, rq, nullptr, scratch);
    CHECK(r.home == order[1]);
    CHECK(r.pick.backend == order[3]);
    CHECK(r.pick.skipped_excluded == 1);
    std::fill(load.down.begin(), load.down.end(), 0);
    // All three candidates full: overflow along the order (first with room after them).
    load.set(order[5], 4);
    for (int j = 0; j < 3; ++j) load.set(order[j], 20);
    r = route_pick(sel, h, load.input(), o, rq, nullptr, scratch);
    CHECK(r.reason == RouteReason::kSpill);
    CHECK(r.pick.backend == order[3]);
    CHECK(r.pick.skipped_full == 3);
    // R beyond the pool: clamped to the eligible backends.
    rq.replicas = 100;
    for (BackendIndex b = 0; b < 8; ++b) load.set(b, 4);
    load.set(order[7], 1);
    r = route_pick(sel, h, load.input(), o, rq, nullptr, scratch);
    CHECK(r.replicas == 8);
    CHECK(r.pick.backend == order[7]);
  }
}

TEST_CASE("hot-key replicas: round robin cycles over the R candidates with room") {
  const BackendSet set = make_set(test::specs(5));
  const Selector sel = make_selector(set, Algorithm::kMaglev);
  std::vector<uint64_t> scratch(pick_scratch_words(sel));
  const uint64_t h = test::key_hash(3);
  std::vector<BackendIndex> order(5);
  REQUIRE(sel.preference(h, order) == 5);
  Load load(set);
  RouteOptions o = route_opts(0, 0, ProbeOrder::kClockwise);
  o.replica_choice = ReplicaChoice::kRoundRobin;
  RouteRequest rq;
  rq.replicas = 3;
  for (uint64_t s = 0; s < 6; ++s) {
    rq.sequence = s;
    CHECK(route_pick(sel, h, load.input(), o, rq, nullptr, scratch).pick.backend == order[s % 3]);
  }
  o.bounded.balance_factor = 100;
  for (BackendIndex b = 0; b < 5; ++b) load.set(b, 1);
  load.set(order[1], 5);  // full
  rq.sequence = 1;
  CHECK(route_pick(sel, h, load.input(), o, rq, nullptr, scratch).pick.backend == order[2]);
}

TEST_CASE("route_pick property: caps hold with memory and replicas under random sequences") {
  std::vector<BackendSpec> specs = test::specs(12, {1, 2, 3, 1});
  specs[5].weight = 0;
  const BackendSet set = make_set(specs);
  std::mt19937_64 rng(777);
  for (Algorithm algo : test::kAllAlgorithms) {
    const Selector sel = make_selector(set, algo);
    std::vector<uint64_t> scratch(pick_scratch_words(sel));
    for (ProbeOrder probe : {ProbeOrder::kClockwise, ProbeOrder::kRandom}) {
      for (ReplicaChoice choice : {ReplicaChoice::kLeastLoaded, ReplicaChoice::kRoundRobin}) {
        CAPTURE(name(algo));
        RouteOptions o = route_opts(125, 2, probe, 1);
        o.replica_choice = choice;
        SpillMemory mem(256);
        Load load(set);
        std::vector<BackendIndex> active;
        int sticky = 0, replica = 0;
        for (int op = 0; op < 6000; ++op) {
          if (op % 1000 == 0) {
            std::fill(load.down.begin(), load.down.end(), 0);
            for (int d = static_cast<int>(rng() % 3); d > 0; --d) bit_set(load.down, rng() % 12);
          }
          if (!active.empty() && rng() % 100 < 48) {
            const size_t at = rng() % active.size();
            load.in_flight[active[at]].fetch_sub(1, std::memory_order_relaxed);
            active[at] = active.back();
            active.pop_back();
            continue;
          }
          const uint64_t k = rng() % 4 == 0 ? rng() % 3 : 3 + rng() % 200;
          const uint64_t h = test::key_hash(k);
          RouteRequest rq;
          rq.replicas = k < 3 ? 1 + static_cast<uint32_t>(k) * 2 : 1;
          rq.sequence = rng();
          const PickInput in = load.input();
          const RouteResult r = route_pick(sel, h, in, o, rq, &mem, scratch);
          REQUIRE(r.pick.backend != kNoBackend);
          REQUIRE(load.weights[r.pick.backend] > 0);
          REQUIRE_FALSE(bit_test(load.down, r.pick.backend));
          REQUIRE_FALSE(r.pick.all_full);  // c >= 1: some backend always has room
          const uint32_t cap = capacity(in.total_in_flight, load.weights[r.pick.backend],
                                        in.total_weight, o.bounded);
          REQUIRE(r.pick.capacity == cap);
          REQUIRE(load.in_flight[r.pick.backend].load() < cap);
          // Home wins whenever it has room, unless the key is remembered elsewhere (hysteresis)
          // or it is a hot key spread over replicas.
          const uint32_t home_cap =
              capacity(in.total_in_flight, load.weights[r.home], in.total_weight, o.bounded);
          if (rq.replicas == 1 && r.reason != RouteReason::kSticky &&
              load.in_flight[r.home].load() < home_cap) {
            REQUIRE(r.pick.backend == r.home);
          }
          sticky += r.reason == RouteReason::kSticky;
          replica += r.reason == RouteReason::kReplica;
          load.in_flight[r.pick.backend].fetch_add(1, std::memory_order_relaxed);
          active.push_back(r.pick.backend);
        }
        CHECK(sticky > 0);
        CHECK(replica > 0);
      }
    }
  }
}

}  // namespace
}  // namespace rondel::core
