// Tests of the fleet's shared hot-key table: merging the instances' counts (order does not
// matter), R from the merged counts, and instances that detect on their own shares of a Zipf
// stream agreeing on every key once they read the same merged counts.

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "rondel/core/fleet_hot.h"
#include "rondel/core/hot_keys.h"
#include "rondel/core/route_policy.h"

namespace rondel::core {
namespace {

TEST_CASE("merge: totals and counts add up by hash, heaviest first, cut at the limit") {
  const HotCounts a{100, {{7, 30}, {9, 10}}};
  const HotCounts b{50, {{9, 25}, {4, 5}}};
  const HotCounts m = merge_hot_counts(std::vector<HotCounts>{a, b}, 10);
  CHECK(m.total == 150);
  CHECK(m.keys == std::vector<HotCount>{{9, 35}, {7, 30}, {4, 5}});
  CHECK(merge_hot_counts(std::vector<HotCounts>{a, b}, 2).keys ==
        std::vector<HotCount>{{9, 35}, {7, 30}});
  // Ties: the smaller hash first.
  CHECK(merge_hot_counts(std::vector<HotCounts>{{1, {{5, 3}}}, {1, {{2, 3}}}}, 10).keys ==
        std::vector<HotCount>{{2, 3}, {5, 3}});
  CHECK(merge_hot_counts(std::vector<HotCounts>{}, 10) == HotCounts{});
}

TEST_CASE("merge: the result does not depend on the order of the parts (property)") {
  std::mt19937_64 rng(20261205);
  for (int round = 0; round < 500; ++round) {
    std::vector<HotCounts> parts(1 + rng() % 5);
    for (HotCounts& p : parts) {
      p.total = rng() % 10000;
      std::vector<uint64_t> hashes;
      for (size_t k = rng() % 20; k > 0; --k) hashes.push_back(rng() % 40);
      std::sort(hashes.begin(), hashes.end());
      hashes.erase(std::unique(hashes.begin(), hashes.end()), hashes.end());
      for (uint64_t h : hashes) p.keys.push_back({h, rng() % 100});
    }
    const size_t limit = 1 + rng() % 30;
    const HotCounts first = merge_hot_counts(parts, limit);
    std::shuffle(parts.begin(), parts.end(), rng);
    CHECK(merge_hot_counts(parts, limit) == first);
  }
}

TEST_CASE("fleet table: R from the merged share, rounded down to a power of two") {
  HotReplicaOptions o;
  o.hot_share_pct = 5;  // 8 backends: a key above 1/160 of the requests gets 2 replicas
  o.min_count = 16;
  HotReplicas out(64);
  // 10% -> ceil(16) clamped to 8; 3% -> ceil(4.8) = 5 -> 4; 1% -> ceil(1.6) = 2; 0.3% -> 1;
  // 10 requests: below min_count.
  const HotCounts merged{100000, {{1, 10000}, {3, 3000}, {2, 1000}, {4, 300}, {5, 10}}};
  const std::vector<HotCount> hot = build_fleet_table(merged, 8, o, out);
  CHECK(hot == std::vector<HotCount>{{1, 10000}, {3, 3000}, {2, 1000}});
  CHECK(out.replicas(1) == 8);
  CHECK(out.replicas(3) == 4);
  CHECK(out.replicas(2) == 2);
  CHECK(out.replicas(4) == 1);
  CHECK(out.replicas(5) == 1);
  // Fewer eligible backends, or max_replicas: R fits them.
  build_fleet_table(merged, 3, o, out);
  CHECK(out.replicas(1) == 2);
  o.max_replicas = 4;
  build_fleet_table(merged, 8, o, out);
  CHECK(out.replicas(1) == 4);
  // A full table keeps the heaviest keys.
  HotReplicas small(1);
  CHECK(build_fleet_table(merged, 8, o, small).size() == 1);
  CHECK(small.replicas(1) == 4);
  CHECK(small.replicas(3) == 1);
}

TEST_CASE("three instances on their own shares agree once they merge their counts") {
  // A Zipf(1.1) stream over 10,000 keys split 60/30/10 between three instances, each with its
  // own detector (64 counters). Each instance's own table disagrees with the others' on some
  // keys; the tables built from the merged counts are identical, whatever order each instance
  // merges in.
  constexpr size_t kKeys = 10000;
  std::vector<double> cdf(kKeys);
  double sum = 0;
  for (size_t i = 0; i < kKeys; ++i) cdf[i] = sum += 1.0 / std::pow(double(i + 1), 1.1);
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(0, sum);
  std::vector<HotKeys> detectors;
  for (int i = 0; i < 3; ++i) detectors.emplace_back(64, 1000000);
  for (int r = 0; r < 30000; ++r) {
    const uint64_t key = std::lower_bound(cdf.begin(), cdf.end(), u(rng)) - cdf.begin();
    const uint64_t pick = rng() % 10;
    detectors[pick < 6 ? 0 : pick < 9 ? 1 : 2].observe(key * 0x9E3779B97F4A7C15ULL + 1, {});
  }
  std::vector<HotCounts> own(3);
  for (int i = 0; i < 3; ++i) {
    own[i].total = detectors[i].total();
    for (const HotKeys::Entry& e : detectors[i].top(64)) own[i].keys.push_back({e.hash, e.count - e.error});
  }
  HotReplicaOptions o;
  o.hot_share_pct = 5;
  o.min_count = 16;
  std::vector<HotReplicas> alone(3, HotReplicas(64)), shared(3, HotReplicas(64));
  size_t disagreements_alone = 0;
  for (int i = 0; i < 3; ++i) {
    build_fleet_table(own[i], 8, o, alone[i]);
    std::vector<HotCounts> parts = own;
    std::rotate(parts.begin(), parts.begin() + i, parts.end());  // each merges in its own order
    build_fleet_table(merge_hot_counts(parts, 64), 8, o, shared[i]);
  }
  for (const HotCounts& c : own) {
    for (const HotCount& k : c.keys) {
      disagreements_alone += alone[0].replicas(k.hash) != alone[1].replicas(k.hash) ||
                             alone[0].replicas(k.hash) != alone[2].replicas(k.hash);
      CHECK(shared[0].replicas(k.hash) == shared[1].replicas(k.hash));
      CHECK(shared[0].replicas(k.hash) == shared[2].replicas(k.hash));
    }
  }
  CHECK(disagreements_alone > 0);  // the problem the merge solves is real on this stream
}

}  // namespace
}  // namespace rondel::core
