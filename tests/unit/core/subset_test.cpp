// Subsets on one ring (core/subset.h): the walk that skips non-members gives exactly the
// placement, and the bounded pick, of the structure built from the subset's members alone.
#include "rondel/core/subset.h"

#include <doctest/doctest.h>

#include <atomic>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core_test_util.h"
#include "rondel/core/bitset.h"
#include "rondel/core/bounded.h"

namespace rondel::core {
namespace {

constexpr size_t kBackends = 200;
constexpr int kLabels = 6;

struct Fleet {
  BackendSet set;
  std::vector<LabelMask> labels;
};

Fleet make_fleet(std::mt19937_64& rng) {
  std::vector<BackendSpec> specs;
  std::vector<LabelMask> labels;
  for (size_t i = 0; i < kBackends; ++i) {
    specs.push_back({"node-" + std::to_string(i), static_cast<uint32_t>(1 + rng() % 3)});
    labels.push_back(rng() & ((LabelMask{1} << kLabels) - 1));  // each label with p = 1/2
  }
  return Fleet{test::make_set(std::move(specs)), std::move(labels)};
}

// The members alone, as their own set (indices differ: compared by id).
BackendSet members_set(const Fleet& f, const Subset& s) {
  std::vector<BackendSpec> specs;
  for (size_t i = 0; i < f.set.size(); ++i) {
    if (s.contains(static_cast<BackendIndex>(i))) specs.push_back(f.set.specs()[i]);
  }
  return test::make_set(std::move(specs));
}

}  // namespace

TEST_CASE("subset walk on one ring / rendezvous equals the structure of the subset alone") {
  std::mt19937_64 rng(18);
  const Fleet f = make_fleet(rng);
  SelectorOptions o;
  o.points_per_weight = 160;  // no max_points cap: each backend's points do not depend on W
  for (Algorithm a : {Algorithm::kRing, Algorithm::kRendezvous}) {
    const Selector whole = test::make_selector(f.set, a, o);
    std::vector<uint64_t> scratch(whole.scratch_words());
    for (int trial = 0; trial < 40; ++trial) {
      const LabelMask required = rng() & ((LabelMask{1} << kLabels) - 1);
      const Subset s = Subset::build(f.set, f.labels, required);
      CAPTURE(test::name(a));
      CAPTURE(required);
      if (s.empty()) {
        CHECK(subset_owner(whole, 1, s, scratch) == kNoBackend);
        continue;
      }
      const BackendSet alone_set = members_set(f, s);
      const Selector alone = test::make_selector(alone_set, a, o);
      for (int k = 0; k < 500; ++k) {
        const uint64_t h = rng();
        const BackendIndex got = subset_owner(whole, h, s, scratch);
        REQUIRE(got != kNoBackend);
        CHECK(f.set[got].id == alone_set[alone.owner(h)].id);
      }
    }
  }
}

TEST_CASE(
    "bounded pick restricted to a subset equals the pick on the subset's own ring, with "
    "the bound over the members") {
  std::mt19937_64 rng(7);
  const Fleet f = make_fleet(rng);
  SelectorOptions o;
  o.points_per_weight = 160;
  const Selector whole = test::make_selector(f.set, Algorithm::kRing, o);
  std::vector<uint64_t> pick_scratch(pick_scratch_words(whole));
  std::vector<uint64_t> excluded(bitset_words(f.set.size()));
  std::vector<uint32_t> weights;
  for (const auto& b : f.set.specs()) weights.push_back(b.weight);
  BoundedOptions bo;
  bo.balance_factor = 125;
  for (int trial = 0; trial < 30; ++trial) {
    const Subset s = Subset::build(f.set, f.labels, rng() & 0x7);  // up to 3 labels: non-empty
    REQUIRE_FALSE(s.empty());
    const BackendSet alone_set = members_set(f, s);
    const Selector alone = test::make_selector(alone_set, Algorithm::kRing, o);
    // Random loads on every backend; non-members' loads must not change the bound.
    auto loads = std::make_unique<std::atomic<uint32_t>[]>(f.set.size());
    auto alone_loads = std::make_unique<std::atomic<uint32_t>[]>(alone_set.size());
    std::vector<uint32_t> alone_weights;
    uint64_t alone_total = 0;
    for (size_t i = 0, j = 0; i < f.set.size(); ++i) {
      loads[i] = static_cast<uint32_t>(rng() % 6);
      if (!s.contains(static_cast<BackendIndex>(i))) continue;
      alone_loads[j] = loads[i].load();
      alone_total += loads[i];
      alone_weights.push_back(weights[i]);
      ++j;
    }
    std::vector<uint64_t> alone_scratch(pick_scratch_words(alone));
    for (int k = 0; k < 200; ++k) {
      const uint64_t h = rng();
      PickInput in;
      in.in_flight = std::span<const std::atomic<uint32_t>>(loads.get(), f.set.size());
      in.weights = weights;
      in.total_weight = f.set.total_weight();
      in.total_in_flight = 99999;  // replaced by the members' sum
      restrict_to_subset(s, in, excluded);
      CHECK(in.total_weight == s.total_weight());
      CHECK(in.total_in_flight == alone_total);
      const PickResult got = bounded_pick(whole, h, in, bo, pick_scratch);
      PickInput ain;
      ain.in_flight = std::span<const std::atomic<uint32_t>>(alone_loads.get(), alone_set.size());
      ain.weights = alone_weights;
      ain.total_weight = s.total_weight();
      ain.total_in_flight = alone_total;
      const PickResult want = bounded_pick(alone, h, ain, bo, alone_scratch);
      REQUIRE(got.backend != kNoBackend);
      CHECK(f.set[got.backend].id == alone_set[want.backend].id);
      CHECK(got.all_full == want.all_full);
    }
  }
}

}  // namespace rondel::core
