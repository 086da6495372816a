// The compact ring against a naive reference ring, its tie-breaks, point budget and spread.
#include "rondel/core/ring.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core_test_util.h"
#include "rondel/core/hash.h"
#include "rondel/core/selector.h"

namespace rondel::core {
namespace {

using test::make_selector;
using test::make_set;

// The naive reference: every point as (position, id) in a std::set, same point keys and counts.
class ReferenceRing {
 public:
  ReferenceRing(const std::vector<BackendSpec>& specs, uint64_t ppw, uint64_t max_points) {
    unsigned __int128 wanted = 0;
    uint64_t total_weight = 0;
    for (const auto& s : specs) {
      wanted += static_cast<unsigned __int128>(s.weight) * ppw;
      total_weight += s.weight;
    }
    for (const auto& s : specs) {
      if (s.weight == 0) continue;
      uint64_t count = s.weight * ppw;
      if (wanted > max_points) {
        count =
            std::max<uint64_t>(1, static_cast<uint64_t>(static_cast<unsigned __int128>(s.weight) *
                                                        max_points / total_weight));
      }
      for (uint64_t j = 0; j < count; ++j) {
        std::string key = s.id + std::string(1, '\0') + std::to_string(j);
        points_.insert({static_cast<uint32_t>(hash64(key) >> 32), s.id});
      }
    }
  }

  std::vector<std::string> order(uint64_t hash) const {
    const auto h = static_cast<uint32_t>(hash >> 32);
    auto it = points_.lower_bound({h, std::string()});
    std::vector<std::string> out;
    std::set<std::string> seen;
    for (size_t n = 0; n < points_.size(); ++n, ++it) {
      if (it == points_.end()) it = points_.begin();
      if (seen.insert(it->second).second) out.push_back(it->second);
    }
    return out;
  }

  size_t size() const { return points_.size(); }

 private:
  std::set<std::pair<uint32_t, std::string>> points_;
};

TEST_CASE("Compact ring equals the naive reference ring on random inputs") {
  std::mt19937_64 rng(99);
  for (int round = 0; round < 25; ++round) {
    const size_t n = 1 + rng() % 40;
    std::vector<BackendSpec> specs;
    for (size_t i = 0; i < n; ++i) {
      specs.push_back({"h" + std::to_string(rng() % 1000) + "-" + std::to_string(i) + ":80",
                       static_cast<uint32_t>(rng() % 6)});
    }
    specs[rng() % n].weight = 1 + static_cast<uint32_t>(rng() % 3);
    // The two ids below collide on their first point (top 32 bits 0xb3c340db, found by a
    // birthday search); include them sometimes so the (position, id) tie-break is diffed too.
    if (round % 3 == 0) {
      specs.push_back({"b57397", 1});
      specs.push_back({"b11504", 1});
    }
    SelectorOptions o;
    o.points_per_weight = 1 + static_cast<uint32_t>(rng() % 50);
    o.max_points = round % 4 == 1 ? 1 + static_cast<uint32_t>(rng() % 200) : 1u << 20;
    const ReferenceRing ref(specs, o.points_per_weight, o.max_points);
    std::shuffle(specs.begin(), specs.end(), rng);
    const BackendSet set = make_set(specs);
    const Selector sel = make_selector(set, Algorithm::kRing, o);
    CAPTURE(round);
    REQUIRE(sel.points() == ref.size());
    std::vector<BackendIndex> pref(set.size());
    for (int k = 0; k < 400; ++k) {
      // Mix ordinary keys with keys landing exactly on and around a point position.
      uint64_t h = rng();
      if (k % 4 == 1) h = uint64_t{sel.ring()->positions()[rng() % sel.points()]} << 32;
      if (k % 4 == 2) h = (uint64_t{sel.ring()->positions()[rng() % sel.points()]} << 32) - 1;
      if (k % 4 == 3) h = ~uint64_t{0} - (rng() % 4);
      const std::vector<std::string> want = ref.order(h);
      REQUIRE(set[sel.owner(h)].id == want[0]);
      const size_t got = sel.preference(h, pref);
      REQUIRE(got == want.size());
      for (size_t i = 0; i < got; ++i) REQUIRE(set[pref[i]].id == want[i]);
    }
  }
}

TEST_CASE("Colliding points resolve to the smaller id whatever the input order") {
  // hash64("b11504\0" "0") and hash64("b57397\0" "0") share their top 32 bits.
  const uint32_t position = 0xb3c340db;
  REQUIRE((hash64(std::string("b11504\0"
                              "0",
                              8)) >>
           32) == position);
  REQUIRE((hash64(std::string("b57397\0"
                              "0",
                              8)) >>
           32) == position);
  SelectorOptions o;
  o.points_per_weight = 1;
  for (const auto& specs : {std::vector<BackendSpec>{{"b11504", 1}, {"b57397", 1}},
                            std::vector<BackendSpec>{{"b57397", 1}, {"b11504", 1}}}) {
    const BackendSet set = make_set(specs);
    const Selector sel = make_selector(set, Algorithm::kRing, o);
    REQUIRE(sel.points() == 2);
    CHECK(sel.ring()->positions()[0] == position);
    CHECK(sel.ring()->positions()[1] == position);
    const uint64_t on_point = uint64_t{position} << 32;
    CHECK(set[sel.owner(on_point)].id == "b11504");
    CHECK(set[sel.owner(on_point - 1)].id == "b11504");
    CHECK(set[sel.owner(on_point + (uint64_t{1} << 32))].id == "b11504");  // wraps to point 0
    std::vector<BackendIndex> pref(2);
    REQUIRE(sel.preference(on_point, pref) == 2);
    CHECK(set[pref[1]].id == "b57397");
    // One shared position: "b11504" owns the whole circle, "b57397" nothing.
    const std::vector<double> shares = sel.key_shares();
    CHECK(shares[*set.find("b11504")] == 1.0);
    CHECK(shares[*set.find("b57397")] == 0.0);
  }
}

TEST_CASE("Virtual-node keys are unambiguous: \"a1\"+\"0\" and \"a\"+\"10\" are different points") {
  SelectorOptions o;
  o.points_per_weight = 11;
  const BackendSet set = make_set({{"a", 1}, {"a1", 1}});
  const Selector sel = make_selector(set, Algorithm::kRing, o);
  std::set<uint32_t> distinct(sel.ring()->positions().begin(), sel.ring()->positions().end());
  CHECK(distinct.size() == 22);
  const std::vector<double> shares = sel.key_shares();
  CHECK(shares[0] > 0.0);
  CHECK(shares[1] > 0.0);
}

TEST_CASE("Weights beyond the points budget are scaled down and memory stays bounded") {
  // nginx once built a 2.6 GB ring from one weight=1000000; here the budget holds.
  SelectorOptions o;
  o.max_points = 1u << 16;
  const BackendSet set = make_set({{"huge", 1000000}, {"small-1", 1}, {"small-2", 1}});
  const Selector sel = make_selector(set, Algorithm::kRing, o);
  CHECK(sel.points() <= o.max_points + set.size());
  CHECK(sel.memory_bytes() <= 6 * (o.max_points + set.size()) + 64);
  std::vector<size_t> per(set.size(), 0);
  for (BackendIndex b : sel.ring()->owners()) ++per[b];
  CHECK(per[0] == 65535);  // floor(1000000 * 65536 / 1000002)
  CHECK(per[1] == 1);      // every weight > 0 backend keeps at least one point
  CHECK(per[2] == 1);

  // Proportions survive scaling: 1:3 at a 4096-point budget.
  o.max_points = 4096;
  const BackendSet pair = make_set({{"x", 1000}, {"y", 3000}});
  const Selector scaled = make_selector(pair, Algorithm::kRing, o);
  std::vector<size_t> count(2, 0);
  for (BackendIndex b : scaled.ring()->owners()) ++count[b];
  CHECK(count[0] == 1024);
  CHECK(count[1] == 3072);

  // The default budget (2^20 points, 6 MB) applies with no options at all.
  const Selector dflt = make_selector(set, Algorithm::kRing);
  CHECK(dflt.points() <= (1u << 20) + set.size());
}

TEST_CASE("Ring options are validated") {
  const BackendSet set = make_set({{"a", 1}});
  SelectorOptions o;
  o.points_per_weight = 0;
  auto r = Selector::build(set, o);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().message == "points_per_weight must be > 0");
  o.points_per_weight = 160;
  o.max_points = 0;
  auto r2 = Selector::build(set, o);
  REQUIRE_FALSE(r2.has_value());
  CHECK(r2.error().message == "max_points must be > 0");
}

TEST_CASE("Ring spread at N=100, k=160 matches CV = sqrt((N-1)/(N*k+1))") {
  // Each share is Beta(k, (N-1)k) distributed (k of the N*k spacings of the circle), whose CV
  // is sqrt((N-1)/(N*k+1)) = 7.87%. The CV measured over N = 100 shares has a relative sd of
  // about 1/sqrt(2N) = 7%; allow 25%.
  constexpr size_t kN = 100;
  constexpr double kK = 160;
  const double expected_cv = std::sqrt((kN - 1) / (kN * kK + 1));
  const BackendSet set = make_set(test::specs(kN));
  const Selector sel = make_selector(set, Algorithm::kRing);

  auto cv_of = [](const std::vector<double>& v) {
    double mean = 0;
    for (double x : v) mean += x;
    mean /= static_cast<double>(v.size());
    double var = 0;
    for (double x : v) var += (x - mean) * (x - mean);
    var /= static_cast<double>(v.size() - 1);
    return std::sqrt(var) / mean;
  };
  const double exact_cv = cv_of(sel.key_shares());
  MESSAGE("ring CV from arc lengths: ", exact_cv, " (formula ", expected_cv, ")");
  CHECK(exact_cv == doctest::Approx(expected_cv).epsilon(0.25));

  // The same from 400k sampled keys (adds a binomial part of ~1/sqrt(4000) = 1.6% in quadrature).
  std::vector<double> counts(kN, 0);
  for (uint64_t k = 0; k < 400000; ++k) counts[sel.owner(test::fast_key(k, 77))] += 1;
  const double sampled_cv = cv_of(counts);
  MESSAGE("ring CV from 400k keys: ", sampled_cv);
  CHECK(sampled_cv ==
        doctest::Approx(std::sqrt(expected_cv * expected_cv + 1.0 / 4000)).epsilon(0.25));
}

}  // namespace
}  // namespace rondel::core
