// Two-level placement (placement_key.h): a grouped key's walk, its set, and what growing the set
// moves, over every algorithm.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <set>
#include <vector>

#include "core_test_util.h"
#include "rondel/core/bounded.h"
#include "rondel/core/placement_key.h"
#include "rondel/core/route_policy.h"

namespace rondel::core {
namespace {

using test::kAllAlgorithms;

std::vector<BackendIndex> walk(const Selector& sel, const PlacementKey& key) {
  std::vector<uint64_t> scratch(sel.scratch_words());
  Selector::Cursor c = sel.cursor(key, scratch);
  std::vector<BackendIndex> out;
  for (BackendIndex b = c.next(); b != kNoBackend; b = c.next()) out.push_back(b);
  return out;
}

std::vector<BackendIndex> group_set(const Selector& sel, uint64_t group, uint32_t r) {
  std::vector<BackendIndex> set(r);
  set.resize(sel.preference(group, set));
  return set;
}

TEST_CASE("a grouped key walks its group's set first, then every other backend once") {
  const BackendSet set = test::make_set(test::specs(12, {1, 2, 3}));
  for (Algorithm a : kAllAlgorithms) {
    CAPTURE(test::name(a));
    const Selector sel = test::make_selector(set, a);
    for (uint32_t r : {1u, 2u, 3u, 4u, 8u, 12u}) {
      for (uint64_t i = 0; i < 50; ++i) {
        const PlacementKey key(test::fast_key(i), test::fast_key(i % 5, 77), r);
        const std::vector<BackendIndex> order = walk(sel, key);
        REQUIRE(order.size() == sel.eligible_count());
        REQUIRE(std::set<BackendIndex>(order.begin(), order.end()).size() == order.size());
        const std::vector<BackendIndex> members = group_set(sel, key.group, r);
        // The first |set| of the walk are exactly the set's members...
        const std::set<BackendIndex> head(order.begin(), order.begin() + members.size());
        CHECK(head == std::set<BackendIndex>(members.begin(), members.end()));
        // ... in the key's own order, and the others follow in the key's order too.
        const std::vector<BackendIndex> plain = walk(sel, PlacementKey(key.hash));
        std::vector<BackendIndex> in_plain_order, others;
        for (BackendIndex b : plain) {
          (head.count(b) ? in_plain_order : others).push_back(b);
        }
        CHECK(std::equal(in_plain_order.begin(), in_plain_order.end(), order.begin()));
        CHECK(std::equal(others.begin(), others.end(), order.begin() + members.size()));
        std::vector<uint64_t> scratch(sel.scratch_words());
        CHECK(sel.owner(key, scratch) == order.front());
      }
    }
  }
}

TEST_CASE("with a set of one every key of the group starts on the group's owner") {
  const BackendSet set = test::make_set(test::specs(8));
  for (Algorithm a : kAllAlgorithms) {
    CAPTURE(test::name(a));
    const Selector sel = test::make_selector(set, a);
    const uint64_t group = test::fast_key(3, 99);
    std::set<BackendIndex> seconds;
    for (uint64_t i = 0; i < 200; ++i) {
      const std::vector<BackendIndex> order = walk(sel, PlacementKey(test::fast_key(i), group, 1));
      CHECK(order.front() == sel.owner(group));
      seconds.insert(order[1]);
    }
    // A key that spills goes on along its own order: the group's keys have many second homes.
    CHECK(seconds.size() == sel.eligible_count() - 1);
  }
}

TEST_CASE("growing a group's set moves only the keys whose first member is new") {
  const BackendSet set = test::make_set(test::specs(16));
  for (Algorithm a : kAllAlgorithms) {
    CAPTURE(test::name(a));
    const Selector sel = test::make_selector(set, a);
    const uint64_t group = test::fast_key(11, 5);
    for (auto [r1, r2] : {std::pair{1u, 2u}, {2u, 4u}, {4u, 8u}, {3u, 4u}}) {
      CAPTURE(r1);
      CAPTURE(r2);
      const std::vector<BackendIndex> small = group_set(sel, group, r1);
      const std::vector<BackendIndex> big = group_set(sel, group, r2);
      REQUIRE(std::equal(small.begin(), small.end(), big.begin()));  // nested sets
      const int keys = 4000;
      int moved = 0;
      for (int i = 0; i < keys; ++i) {
        const uint64_t h = test::fast_key(static_cast<uint64_t>(i));
        std::vector<uint64_t> scratch(sel.scratch_words());
        const BackendIndex before = sel.owner(PlacementKey(h, group, r1), scratch);
        const BackendIndex after = sel.owner(PlacementKey(h, group, r2), scratch);
        if (before != after) {
          ++moved;
          // A key that moves, moves to a new member.
          CHECK(std::find(big.begin() + r1, big.end(), after) != big.end());
        }
      }
      // Expected share (r2 - r1) / r2; the ring and skeleton give members unequal arcs, so the
      // tolerance is wide there.
      const double expect = double(r2 - r1) / r2;
      const double tol = (a == Algorithm::kRendezvous || a == Algorithm::kMaglev) ? 0.05 : 0.15;
      CHECK(std::abs(double(moved) / keys - expect) < tol);
    }
  }
}

TEST_CASE("a grouped key spills inside its set first, under the bound") {
  const BackendSet set = test::make_set(test::specs(8));
  const Selector sel = test::make_selector(set, Algorithm::kRendezvous);
  std::vector<std::atomic<uint32_t>> in_flight(8);
  std::vector<uint32_t> weights(8, 1);
  const uint64_t group = test::fast_key(1, 2);
  const std::vector<BackendIndex> members = group_set(sel, group, 2);
  const PlacementKey key(test::fast_key(42), group, 2);
  std::vector<uint64_t> scratch(pick_scratch_words(sel));
  // The key's first member is full: the other member takes it, not a backend outside the set.
  const BackendIndex first = walk(sel, key)[0];
  in_flight[first] = 10;
  PickInput in;
  in.in_flight = in_flight;
  in.weights = weights;
  in.total_in_flight = 10;
  in.total_weight = 8;
  BoundedOptions o;
  o.balance_factor = 125;
  const PickResult pr = bounded_pick(sel, key, in, o, scratch);
  CHECK(pr.owner == first);
  CHECK(pr.backend != first);
  CHECK(std::find(members.begin(), members.end(), pr.backend) != members.end());
}

TEST_CASE("replica counts quantize to powers of two with hysteresis") {
  // quantize_replicas(raw, demand in 1/256, previous)
  CHECK(quantize_replicas(0, 0, 0) == 1);
  CHECK(quantize_replicas(1, 0, 4) == 1);          // not hot any more (min_count): 1
  CHECK(quantize_replicas(3, 3 * 256 - 10, 0) == 2);
  CHECK(quantize_replicas(5, 5 * 256 - 10, 0) == 4);
  CHECK(quantize_replicas(8, 8 * 256, 4) == 8);    // reaching the next power grows at once
  CHECK(quantize_replicas(7, 7 * 256, 8) == 8);    // below it keeps it
  CHECK(quantize_replicas(3, 3 * 256, 8) == 8);    // down to 3/8 of it still keeps it
  CHECK(quantize_replicas(2, 2 * 256, 8) == 2);    // a quarter of it shrinks
  CHECK(quantize_replicas(1, 200, 2) == 2);        // barely hot: keeps 2 above demand 1/2
  CHECK(quantize_replicas(1, 128, 2) == 1);        // at 1/2, back to 1
}

}  // namespace
}  // namespace rondel::core
