// The per-worker metric shards and the merges a scrape does: histogram buckets follow
// Prometheus' `le` (a value equal to a bound is in that bucket), a worker's pair table caps its
// distinct pairs, hot-key lists merge keeping Space-Saving's bounds, and an exported pair never
// moves between series.
#include <doctest/doctest.h>

#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "metrics_shards.h"

namespace md = rondel::server::metrics_detail;
using Entry = rondel::core::HotKeys::Entry;

TEST_CASE("a histogram shard counts a value equal to a bound in that bound's bucket") {
  constexpr std::array<uint64_t, 3> bounds = {0, 10, 100};
  md::HistogramShard<3> h;
  for (uint64_t v : {0, 1, 10, 11, 100, 101, 5000}) h.observe(bounds, v);
  md::HistogramSum<3> sum;
  sum.add(h);
  sum.add(h);  // a second worker's identical shard
  CHECK(sum.buckets == std::array<uint64_t, 4>{2, 4, 4, 4});
  CHECK(sum.sum == 2 * (0 + 1 + 10 + 11 + 100 + 101 + 5000));
}

TEST_CASE("the duration buckets are the documented 0.5 ms .. 60 s") {
  CHECK(md::kDurationBoundsUs.front() == 500);
  CHECK(md::kDurationBoundsUs.back() == 60000000);
  CHECK(md::kHopBounds.back() == 32);
}

TEST_CASE("a pair table counts per pair and sends new pairs past its cap to overflow") {
  auto t = std::make_unique<md::PairTable>();
  uint64_t k = md::PairTable::key(3, 7);
  CHECK(md::PairTable::owner_of(k) == 3);
  CHECK(md::PairTable::backend_of(k) == 7);
  CHECK(md::PairTable::key(0, 0) != 0);
  for (uint32_t i = 0; i < md::PairTable::kMaxPairs; ++i) t->add(md::PairTable::key(i, i + 1));
  t->add(k);                                  // pair kMaxPairs + 1: overflow
  t->add(md::PairTable::key(0, 1));           // a known pair still counts on its own
  std::map<uint64_t, uint64_t> seen;
  t->for_each([&seen](uint64_t key, uint64_t c) { seen[key] = c; });
  CHECK(seen.size() == md::PairTable::kMaxPairs);
  CHECK(seen[md::PairTable::key(0, 1)] == 2);
  CHECK(seen.count(k) == 0);
  CHECK(t->overflow() == 1);
}

TEST_CASE("hot-key lists merge: counts and errors add, a full list's floor covers missing keys") {
  std::vector<std::vector<Entry>> parts = {
      {{1, "a", 50, 0}, {2, "b", 20, 5}},  // full (capacity 2): floor 20
      {{3, "c", 30, 0}},                   // not full: a key missing from it counts 0 there
  };
  auto top = md::merge_top(parts, 2, 10);
  REQUIRE(top.size() == 3);
  CHECK(top[0].hash == 1);
  CHECK(top[0].count == 50);
  CHECK(top[1].hash == 3);  // 30 here + up to 20 in the full list
  CHECK(top[1].count == 50);
  CHECK(top[1].error == 20);
  CHECK(top[2].hash == 2);
  CHECK(top[2].count == 20);
  CHECK(top[2].error == 5);
  CHECK(md::merge_top(parts, 2, 1).size() == 1);
}

TEST_CASE("one worker's list comes back as it was, cut to k") {
  std::vector<std::vector<Entry>> parts = {{{9, "x", 7, 1}, {8, "y", 7, 2}, {4, "z", 1, 0}}};
  auto top = md::merge_top(parts, 64, 2);
  REQUIRE(top.size() == 2);
  CHECK(top[0].hash == 9);
  CHECK(top[1].hash == 8);
}

TEST_CASE("spill pairs: named by serial, capped per pool, and an exported pair keeps its series") {
  std::unordered_map<uint32_t, std::string_view> ids = {{0, "b0"}, {1, "b1"}, {2, "b2"}};
  std::set<uint64_t> exported;
  std::map<uint64_t, uint64_t> counts = {{md::PairTable::key(0, 1), 5},
                                         {md::PairTable::key(9, 1), 4}};  // owner 9 left
  auto named = md::name_pairs(counts, 0, ids, exported);
  REQUIRE(named.size() == 1);
  CHECK(named[0].owner == "b0");
  CHECK(named[0].backend == "b1");
  CHECK(named[0].count == 5);

  // Fill the exported set to its cap: a new pair goes to _other, the known one stays its own.
  for (uint32_t i = 0; exported.size() < md::PairTable::kMaxPairs; ++i) {
    exported.insert(md::PairTable::key(100 + i, 100 + i));
  }
  counts[md::PairTable::key(1, 2)] = 3;
  counts[md::PairTable::key(0, 1)] = 6;
  named = md::name_pairs(counts, 2, ids, exported);
  REQUIRE(named.size() == 2);
  CHECK(named[0].owner == "b0");
  CHECK(named[0].count == 6);
  CHECK(named[1].owner == "_other");
  CHECK(named[1].backend == "_other");
  CHECK(named[1].count == 3 + 2);
}
