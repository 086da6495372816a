// Bounded-load capacity known answers and the pick's properties under random load sequences.
#include "rondel/core/bounded.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "core_test_util.h"
#include "rondel/core/bitset.h"

namespace rondel::core {
namespace {

using test::make_selector;
using test::make_set;
using test::name;

BoundedOptions opts(uint32_t bf, uint32_t slack = 0, ProbeOrder p = ProbeOrder::kClockwise) {
  BoundedOptions o;
  o.balance_factor = bf;
  o.slack = slack;
  o.probe = p;
  return o;
}

TEST_CASE("capacity known answers") {
  CHECK(capacity(7, 1, 4, opts(125)) == 3);     // ceil(1.25 * 8 / 4) = ceil(2.5)
  CHECK(capacity(8, 1, 4, opts(125)) == 3);     // ceil(1.25 * 9 / 4) = ceil(2.8125)
  CHECK(capacity(11, 1, 4, opts(125)) == 4);    // ceil(1.25 * 12 / 4) = 3.75
  CHECK(capacity(7, 2, 4, opts(125)) == 5);     // ceil(1.25 * 8 * 2 / 4) = 5
  CHECK(capacity(0, 1, 100, opts(125)) == 1);   // at least 1
  CHECK(capacity(99, 1, 100, opts(100)) == 1);  // exactly the fair share
  CHECK(capacity(100, 1, 100, opts(100)) == 2);
  CHECK(capacity(7, 1, 4, opts(0)) == std::numeric_limits<uint32_t>::max());
  CHECK(capacity(7, 0, 4, opts(125)) == 0);
  CHECK(capacity(7, 0, 4, opts(0)) == 0);
  // Slack: max(ceil(1.0 * 8 / 4) = 2, ceil(8 / 4) + 2 = 4).
  CHECK(capacity(7, 1, 4, opts(100, 2)) == 4);
  // Slack does not lower a larger bf cap: max(ceil(3 * 8 / 4) = 6, 2 + 1).
  CHECK(capacity(7, 1, 4, opts(300, 1)) == 6);
  // W below w (no backend counted as up) behaves as W = w.
  CHECK(capacity(7, 3, 0, opts(125)) == 10);  // ceil(1.25 * 8)
  // No overflow at the extremes; saturates.
  CHECK(capacity(UINT64_MAX, UINT32_MAX, 1, opts(UINT32_MAX, UINT32_MAX)) == UINT32_MAX);
  CHECK(capacity(UINT64_MAX, 1, UINT64_MAX, opts(125)) == 2);  // ceil(1.25 * 2^64 / (2^64 - 1))
  CHECK(capacity(1000000, 1, 1000, opts(UINT32_MAX)) ==
        UINT32_MAX);  // 42949672.95 * 1000001 / 1000 > 2^32
}

TEST_CASE("pick_scratch_words is twice the selector's") {
  const BackendSet set = make_set(test::specs(130));
  const Selector ring = make_selector(set, Algorithm::kRing);
  CHECK(pick_scratch_words(ring) == 2 * 3);
  const Selector hrw = make_selector(set, Algorithm::kRendezvous);
  CHECK(pick_scratch_words(hrw) == 2 * (3 + 130));
}

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
  std::vector<std::atomic<uint32_t>> in_flight;
  std::vector<uint32_t> weights;
  std::vector<uint64_t> down;
};

TEST_CASE("Bounded pick property: room is always used, caps hold, each backend visited once") {
  std::vector<BackendSpec> specs = test::specs(12, {1, 2, 3, 1});
  specs[5].weight = 0;  // drained: never picked
  const BackendSet set = make_set(specs);
  std::mt19937_64 rng(12345);
  for (Algorithm algo : test::kAllAlgorithms) {
    const Selector sel = make_selector(set, algo);
    std::vector<uint64_t> scratch(pick_scratch_words(sel));
    for (ProbeOrder probe : {ProbeOrder::kClockwise, ProbeOrder::kRandom}) {
      for (uint32_t bf : {0u, 100u, 125u, 150u, 200u}) {
        for (uint32_t slack : {0u, 3u}) {
          CAPTURE(name(algo));
          CAPTURE(probe == ProbeOrder::kRandom);
          CAPTURE(bf);
          CAPTURE(slack);
          const BoundedOptions o = opts(bf, slack, probe);
          Load load(set);
          std::vector<BackendIndex> active;
          int spilled = 0;
          int picks = 0;
          for (int op = 0; op < 3000; ++op) {
            if (op % 400 == 0) {
              // New down set (0-4 backends), and one backend in slow start at weight 1.
              std::fill(load.down.begin(), load.down.end(), 0);
              for (int d = static_cast<int>(rng() % 5); d > 0; --d) bit_set(load.down, rng() % 12);
              for (size_t i = 0; i < 12; ++i)
                load.weights[i] = set[static_cast<BackendIndex>(i)].weight;
              const size_t slow = rng() % 12;
              if (load.weights[slow] > 0) load.weights[slow] = 1;
            }
            if (!active.empty() && rng() % 100 < 45) {
              const size_t at = rng() % active.size();
              load.in_flight[active[at]].fetch_sub(1, std::memory_order_relaxed);
              active[at] = active.back();
              active.pop_back();
              continue;
            }
            // Skewed keys: half the traffic goes to 3 hot objects.
            const uint64_t h = rng() % 2 == 0 ? test::key_hash(rng() % 3) : rng();
            const PickInput in = load.input();
            const PickResult r = bounded_pick(sel, h, in, o, scratch);
            ++picks;
            REQUIRE(r.owner == sel.owner(h));
            // Eligible = up, selector-eligible, effective weight > 0.
            std::vector<BackendIndex> eligible;
            for (BackendIndex i = 0; i < 12; ++i) {
              if (set[i].weight > 0 && load.weights[i] > 0 && !bit_test(load.down, i)) {
                eligible.push_back(i);
              }
            }
            REQUIRE(r.skipped_full + r.skipped_excluded <= sel.eligible_count());
            if (eligible.empty()) {
              REQUIRE(r.backend == kNoBackend);
              continue;
            }
            REQUIRE(r.backend != kNoBackend);
            REQUIRE(std::find(eligible.begin(), eligible.end(), r.backend) != eligible.end());
            const uint32_t cap =
                capacity(in.total_in_flight, load.weights[r.backend], in.total_weight, o);
            REQUIRE(r.capacity == cap);
            const uint32_t cur = load.in_flight[r.backend].load();
            if (!r.all_full) {
              REQUIRE(cur < cap);  // never above its cap at the moment of the pick
              REQUIRE(r.skipped_full + r.skipped_excluded + 1 <= sel.eligible_count());
            } else {
              // All full: truly no room anywhere, and the least loaded one was taken.
              for (BackendIndex i : eligible) {
                REQUIRE(load.in_flight[i].load() >=
                        capacity(in.total_in_flight, load.weights[i], in.total_weight, o));
                REQUIRE(load.in_flight[i].load() >= cur);
              }
              REQUIRE(r.skipped_full == eligible.size());
            }
            // With c >= 1 the caps of the up backends sum to more than the requests they
            // hold, so some backend always has room (Mirrokni et al., Lemma 1).
            if (bf >= 100) REQUIRE_FALSE(r.all_full);
            if (bf == 0) REQUIRE_FALSE(r.all_full);
            // The owner wins whenever it is eligible and has room.
            const bool owner_ok =
                std::find(eligible.begin(), eligible.end(), r.owner) != eligible.end() &&
                load.in_flight[r.owner].load() <
                    capacity(in.total_in_flight, load.weights[r.owner], in.total_weight, o);
            if (owner_ok) REQUIRE(r.backend == r.owner);
            if (r.backend != r.owner) ++spilled;
            if (probe == ProbeOrder::kClockwise) {
              // Exactly the first eligible backend with room in the selector's order.
              std::vector<BackendIndex> order(sel.eligible_count());
              order.resize(sel.preference(h, order));
              BackendIndex want = kNoBackend;
              uint16_t full = 0;
              uint16_t excluded = 0;
              for (BackendIndex b : order) {
                if (std::find(eligible.begin(), eligible.end(), b) == eligible.end()) {
                  ++excluded;
                  continue;
                }
                if (load.in_flight[b].load() <
                    capacity(in.total_in_flight, load.weights[b], in.total_weight, o)) {
                  want = b;
                  break;
                }
                ++full;
              }
              if (!r.all_full) {
                REQUIRE(r.backend == want);
                REQUIRE(r.skipped_full == full);
                REQUIRE(r.skipped_excluded == excluded);
              }
            }
            load.in_flight[r.backend].fetch_add(1, std::memory_order_relaxed);
            active.push_back(r.backend);
          }
          // Unbounded never spills except around down backends; bounded spills under skew.
          if (bf == 125 && slack == 0) CHECK(spilled > 0);
          CHECK(picks > 1000);
        }
      }
    }
  }
}

TEST_CASE("After 10k picks with no completions every backend is within its cap (h2o-style)") {
  const BackendSet set = make_set(test::specs(10, {1, 2}));
  for (Algorithm algo : test::kAllAlgorithms) {
    for (ProbeOrder probe : {ProbeOrder::kClockwise, ProbeOrder::kRandom}) {
      CAPTURE(name(algo));
      const Selector sel = make_selector(set, algo);
      std::vector<uint64_t> scratch(pick_scratch_words(sel));
      const BoundedOptions o = opts(125, 0, probe);
      Load load(set);
      for (uint64_t k = 0; k < 10000; ++k) {
        const PickResult r = bounded_pick(sel, test::key_hash(k % 7), load.input(), o, scratch);
        REQUIRE(r.backend != kNoBackend);
        REQUIRE_FALSE(r.all_full);
        load.in_flight[r.backend].fetch_add(1);
      }
      const PickInput in = load.input();
      for (BackendIndex i = 0; i < 10; ++i) {
        // The load after the last pick respects the cap computed for m = 9999 in flight.
        CHECK(load.in_flight[i].load() <=
              capacity(in.total_in_flight - 1, set[i].weight, in.total_weight, o));
      }
    }
  }
}

TEST_CASE(
    "Pick edge cases: everything excluded, all full, too little scratch, weight-0 effective") {
  const BackendSet set = make_set({{"a", 1}, {"b", 1}, {"c", 0}});
  const Selector sel = make_selector(set, Algorithm::kRing);
  std::vector<uint64_t> scratch(pick_scratch_words(sel));
  Load load(set);

  bit_set(load.down, 0);
  bit_set(load.down, 1);
  PickResult r = bounded_pick(sel, 42, load.input(), opts(125), scratch);
  CHECK(r.backend == kNoBackend);
  CHECK(r.owner != kNoBackend);
  CHECK(r.skipped_excluded == 2);

  // All full (caps computed by the caller from a W that counts both, loads above).
  std::fill(load.down.begin(), load.down.end(), 0);
  load.in_flight[0] = 9;
  load.in_flight[1] = 7;
  PickInput in = load.input();
  in.total_in_flight = 2;  // a stale total, as with relaxed reads: caps are ceil(1.25*3/2) = 2
  for (ProbeOrder p : {ProbeOrder::kClockwise, ProbeOrder::kRandom}) {
    r = bounded_pick(sel, 42, in, opts(125, 0, p), scratch);
    CHECK(r.all_full);
    CHECK(r.backend == 1);  // least loaded
    CHECK(r.skipped_full == 2);
    CHECK(r.capacity == 2);
  }

  // Effective weight 0 (e.g. slow start at zero) is skipped like an excluded backend.
  load.in_flight[0] = 0;
  load.in_flight[1] = 0;
  load.weights[0] = 0;
  for (uint64_t k = 0; k < 100; ++k) {
    r = bounded_pick(sel, test::key_hash(k), load.input(), opts(125), scratch);
    CHECK(r.backend == 1);
  }

  // Too little scratch: no pick (the caller's bug is visible, nothing is overrun).
  std::vector<uint64_t> small(pick_scratch_words(sel) - 1);
  CHECK(bounded_pick(sel, 1, load.input(), opts(125), small).backend == kNoBackend);
}

}  // namespace
}  // namespace rondel::core
