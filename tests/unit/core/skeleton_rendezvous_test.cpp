// Skeleton rendezvous: weights (chi-square against the exact cluster shares, and the shares
// against w_i / W), preference order, minimal movement, input-order independence, pinned owners.
#include "rondel/core/skeleton_rendezvous.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core_test_util.h"
#include "rondel/core/bitset.h"
#include "rondel/core/selector.h"

namespace rondel::core {
namespace {

using test::make_selector;
using test::make_set;

constexpr Algorithm kSkel = Algorithm::kSkeletonRendezvous;

// Owner of every key i in [0, keys), by backend id.
std::vector<std::string> owners_by_id(const BackendSet& set, const Selector& sel, size_t keys) {
  std::vector<std::string> out(keys);
  for (size_t i = 0; i < keys; ++i) out[i] = set[sel.owner(test::fast_key(i))].id;
  return out;
}

TEST_CASE("skeleton: sampled owners match the exact cluster shares (chi-square)") {
  // 16 backends, weights 1..4. Under the hypothesis that owner() draws each backend with its
  // exact cluster share, the statistic is chi-square with 15 degrees of freedom; 52.0 is its
  // 1 - 1e-5 quantile (Wilson-Hilferty), so a correct descent fails with probability ~1e-5 for a
  // random choice of the key set.
  const BackendSet set = make_set(test::specs(16, {1, 2, 3, 4}));
  const Selector sel = make_selector(set, kSkel);
  const std::vector<double> share = sel.key_shares();
  constexpr size_t kKeys = 400000;
  std::vector<double> seen(16, 0.0);
  for (size_t i = 0; i < kKeys; ++i) seen[sel.owner(test::fast_key(i, 0x63686932))] += 1;
  double chi2 = 0;
  double total_share = 0;
  for (size_t b = 0; b < 16; ++b) {
    const double expected = share[b] * kKeys;
    chi2 += (seen[b] - expected) * (seen[b] - expected) / expected;
    total_share += share[b];
  }
  CHECK(total_share == doctest::Approx(1.0).epsilon(1e-9));
  CHECK(chi2 < 52.0);
}

TEST_CASE("skeleton: key shares follow weights within the point noise") {
  // Per-backend share over ideal w_i / W. With 160 points per unit of weight the noise of one
  // backend is ~5% (docs/algorithms.md); these sets are fixed, so the bound is deterministic.
  for (size_t n : {16, 200}) {
    CAPTURE(n);
    const BackendSet set = make_set(test::specs(n, {1, 2, 3, 4}));
    const Selector sel = make_selector(set, kSkel);
    const std::vector<double> share = sel.key_shares();
    std::vector<double> by_weight(5, 0.0);
    for (size_t b = 0; b < n; ++b) {
      const auto i = static_cast<BackendIndex>(b);
      const double ideal = static_cast<double>(set[i].weight) / set.total_weight();
      CHECK(share[b] / ideal == doctest::Approx(1.0).epsilon(0.2));
      by_weight[set[i].weight] += share[b];
    }
    // Each weight class (a quarter of the backends) holds its weight's share within 5%.
    for (uint32_t w = 1; w <= 4; ++w) {
      CHECK(by_weight[w] / (w / 10.0) == doctest::Approx(1.0).epsilon(0.05));
    }
  }
}

TEST_CASE("skeleton: adding or removing a backend moves only that backend's keys") {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 4; ++trial) {
    const size_t n = 50 + 150 * trial;
    std::vector<BackendSpec> before = test::specs(n + 1, {1, 2, 3});
    std::shuffle(before.begin(), before.end(), rng);
    const BackendSpec extra = before.back();
    std::vector<BackendSpec> smaller(before.begin(), before.end() - 1);
    const BackendSet big = make_set(before);
    const BackendSet small = make_set(smaller);
    const Selector sel_big = make_selector(big, kSkel);
    const Selector sel_small = make_selector(small, kSkel);
    constexpr size_t kKeys = 100000;
    const auto a = owners_by_id(small, sel_small, kKeys);
    const auto b = owners_by_id(big, sel_big, kKeys);
    size_t moved = 0;
    size_t stray = 0;
    for (size_t i = 0; i < kKeys; ++i) {
      if (a[i] == b[i]) continue;
      ++moved;
      if (b[i] != extra.id) ++stray;  // add: a moved key must go to the new backend
    }
    CAPTURE(n);
    CHECK(stray == 0);
    // Removing it (big -> small) is the same comparison read backwards: the moved keys are
    // exactly the removed backend's. Its share is w / W within the point noise.
    const double ideal = static_cast<double>(extra.weight) / big.total_weight();
    CHECK(moved / static_cast<double>(kKeys) == doctest::Approx(ideal).epsilon(0.35));
  }
}

TEST_CASE("skeleton: the preference order is a permutation of the weight > 0 backends") {
  std::vector<BackendSpec> s = test::specs(300, {1, 2, 0, 3});
  const BackendSet set = make_set(s);
  const Selector sel = make_selector(set, kSkel);
  std::vector<uint64_t> scratch(sel.scratch_words());
  for (uint64_t k = 0; k < 50; ++k) {
    const uint64_t h = test::key_hash(k);
    Selector::Cursor c = sel.cursor(h, scratch);
    std::vector<int> count(300, 0);
    size_t yielded = 0;
    BackendIndex first = kNoBackend;
    for (BackendIndex b = c.next(); b != kNoBackend; b = c.next()) {
      if (first == kNoBackend) first = b;
      REQUIRE(b < 300);
      ++count[b];
      ++yielded;
      REQUIRE(yielded <= 300);
    }
    CHECK(first == sel.owner(h));
    CHECK(yielded == set.eligible_count());
    for (size_t b = 0; b < 300; ++b) {
      CHECK(count[b] == (set[static_cast<BackendIndex>(b)].weight > 0 ? 1 : 0));
    }
  }
}

TEST_CASE("skeleton: fallbacks are drawn in proportion to weight") {
  // The second choice of a key is owner(mix64(hash, 1)) unless that is the owner itself: over
  // many keys the weight-3 backends get about three times the second choices of weight-1 ones.
  const BackendSet set = make_set(test::specs(40, {1, 3}));
  const Selector sel = make_selector(set, kSkel);
  std::vector<uint64_t> scratch(sel.scratch_words());
  double w1 = 0;
  double w3 = 0;
  for (uint64_t k = 0; k < 40000; ++k) {
    Selector::Cursor c = sel.cursor(test::fast_key(k), scratch);
    c.next();
    (set[c.next()].weight == 1 ? w1 : w3) += 1;
  }
  CHECK(w3 / w1 == doctest::Approx(3.0).epsilon(0.15));
}

TEST_CASE("skeleton: lookups visit O(log P) clusters and stay consistent with build limits") {
  const BackendSet set = make_set(test::specs(1000));
  const Selector sel = make_selector(set, kSkel);
  const SkeletonRendezvous* sk = sel.skeleton();
  REQUIRE(sk != nullptr);
  CHECK(sk->points() == 160000);
  CHECK(sk->clusters() < sk->points());
  CHECK(sel.memory_bytes() < 40 * sk->points());
  SelectorOptions capped;
  capped.max_points = 5000;  // the ring's rule: max(1, floor(w * max / W)) = 5 points each
  const Selector small = make_selector(set, kSkel, capped);
  CHECK(small.points() == 5000);
  SelectorOptions zero;
  zero.points_per_weight = 0;
  zero.algorithm = kSkel;
  auto bad = Selector::build(set, zero);
  REQUIRE_FALSE(bad.has_value());
  CHECK(bad.error().message == "points_per_weight must be > 0");
}

TEST_CASE("skeleton: pinned owners (a refactor must not move keys silently)") {
  const BackendSet set = make_set(test::specs(10, {1, 2}));
  const Selector sel = make_selector(set, kSkel);
  std::string got;
  for (uint64_t k = 0; k < 12; ++k) got += std::to_string(sel.owner(test::key_hash(k))) + " ";
  CHECK(got == "1 1 0 3 2 7 6 7 8 1 7 9 ");
}

}  // namespace
}  // namespace rondel::core
