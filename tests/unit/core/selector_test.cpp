// Selector properties common to all algorithms: determinism, order independence, walks,
// weights, minimal disruption and edge cases.
#include "rondel/core/selector.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core_test_util.h"

namespace rondel::core {
namespace {

using test::fast_key;
using test::kAllAlgorithms;
using test::make_selector;
using test::make_set;
using test::name;

std::vector<BackendIndex> full_order(const Selector& sel, uint64_t hash) {
  std::vector<uint64_t> scratch(sel.scratch_words());
  Selector::Cursor c = sel.cursor(hash, scratch);
  std::vector<BackendIndex> out;
  for (BackendIndex b = c.next(); b != kNoBackend; b = c.next()) out.push_back(b);
  return out;
}

TEST_CASE("Placement depends only on (id, weight) pairs, not on input order") {
  std::vector<BackendSpec> base = test::specs(50, {1, 2, 3, 0, 5});
  std::vector<BackendSpec> shuffled = base;
  std::mt19937_64 rng(2024);
  std::shuffle(shuffled.begin(), shuffled.end(), rng);
  const BackendSet a = make_set(base);
  const BackendSet b = make_set(shuffled);
  for (Algorithm algo : kAllAlgorithms) {
    CAPTURE(name(algo));
    const Selector sa = make_selector(a, algo);
    const Selector sb = make_selector(b, algo);
    // Built twice from the same input: identical (determinism).
    const Selector sa2 = make_selector(a, algo);
    int mismatches = 0;
    int rebuild_mismatches = 0;
    for (uint64_t k = 0; k < 100000; ++k) {
      const uint64_t h = fast_key(k);
      if (a[sa.owner(h)].id != b[sb.owner(h)].id) ++mismatches;
      if (sa.owner(h) != sa2.owner(h)) ++rebuild_mismatches;
    }
    CHECK(mismatches == 0);
    CHECK(rebuild_mismatches == 0);
    // Whole preference orders agree too.
    int order_mismatches = 0;
    for (uint64_t k = 0; k < 300; ++k) {
      const std::vector<BackendIndex> oa = full_order(sa, test::key_hash(k));
      const std::vector<BackendIndex> ob = full_order(sb, test::key_hash(k));
      REQUIRE(oa.size() == ob.size());
      for (size_t i = 0; i < oa.size(); ++i) {
        if (a[oa[i]].id != b[ob[i]].id) ++order_mismatches;
      }
    }
    CHECK(order_mismatches == 0);
  }
}

TEST_CASE("Cursor yields every weight > 0 backend exactly once, owner first, like preference()") {
  const BackendSet set = make_set(test::specs(40, {1, 0, 2, 3}));
  for (Algorithm algo : kAllAlgorithms) {
    CAPTURE(name(algo));
    const Selector sel = make_selector(set, algo);
    CHECK(sel.backend_count() == 40);
    CHECK(sel.eligible_count() == 30);
    std::vector<BackendIndex> pref(64);
    std::vector<BackendIndex> pref3(3);
    for (uint64_t k = 0; k < 200; ++k) {
      const uint64_t h = test::key_hash(k);
      const std::vector<BackendIndex> order = full_order(sel, h);
      REQUIRE(order.size() == 30);
      CHECK(order[0] == sel.owner(h));
      std::set<BackendIndex> distinct(order.begin(), order.end());
      CHECK(distinct.size() == 30);
      for (BackendIndex b : order) CHECK(set[b].weight > 0);
      const size_t n = sel.preference(h, pref);
      REQUIRE(n == 30);
      CHECK(std::equal(order.begin(), order.end(), pref.begin()));
      REQUIRE(sel.preference(h, pref3) == 3);
      CHECK(std::equal(pref3.begin(), pref3.end(), order.begin()));
    }
    // An exhausted cursor stays exhausted; a default cursor yields nothing.
    std::vector<uint64_t> scratch(sel.scratch_words());
    Selector::Cursor c = sel.cursor(1, scratch);
    for (int i = 0; i < 30; ++i) CHECK(c.next() != kNoBackend);
    CHECK(c.next() == kNoBackend);
    CHECK(c.next() == kNoBackend);
    Selector::Cursor none;
    CHECK(none.next() == kNoBackend);
    CHECK(sel.preference(1, std::span<BackendIndex>()) == 0);
  }
}

TEST_CASE("One backend: it owns every key and is the whole preference order") {
  const BackendSet set = make_set({{"only:80", 3}});
  for (Algorithm algo : kAllAlgorithms) {
    CAPTURE(name(algo));
    const Selector sel = make_selector(set, algo);
    std::vector<BackendIndex> pref(4, 77);
    for (uint64_t k = 0; k < 1000; ++k) {
      CHECK(sel.owner(fast_key(k)) == 0);
      CHECK(sel.preference(fast_key(k), pref) == 1);
      CHECK(pref[0] == 0);
    }
    CHECK(full_order(sel, 5) == std::vector<BackendIndex>{0});
    CHECK(sel.key_shares() == std::vector<double>{1.0});
  }
}

TEST_CASE("A weight-0 backend is never chosen, in any position of any order") {
  const BackendSet set = make_set({{"a", 1}, {"drained", 0}, {"b", 4}, {"c", 2}});
  for (Algorithm algo : kAllAlgorithms) {
    CAPTURE(name(algo));
    const Selector sel = make_selector(set, algo);
    for (uint64_t k = 0; k < 20000; ++k) {
      CHECK(sel.owner(fast_key(k)) != 1);
      if (k % 100 == 0) {
        const std::vector<BackendIndex> order = full_order(sel, fast_key(k));
        CHECK(order.size() == 3);
        CHECK(std::find(order.begin(), order.end(), BackendIndex{1}) == order.end());
      }
    }
    CHECK(sel.key_shares()[1] == 0.0);
  }
}

TEST_CASE("Key shares follow weights") {
  const std::vector<uint32_t> weights = {1, 2, 3, 4, 1, 2, 3, 4, 1, 2};
  const BackendSet set = make_set(test::specs(weights.size(), weights));
  const double total = 23.0;
  constexpr int kSamples = 200000;
  for (Algorithm algo : kAllAlgorithms) {
    CAPTURE(name(algo));
    const Selector sel = make_selector(set, algo);
    const std::vector<double> shares = sel.key_shares();
    std::vector<int> counts(weights.size(), 0);
    for (int k = 0; k < kSamples; ++k) ++counts[sel.owner(fast_key(k, 31337))];
    double sum = 0;
    for (size_t i = 0; i < weights.size(); ++i) {
      const double expected = weights[i] / total;
      double tolerance = 0;
      switch (algo) {
        case Algorithm::kRing:
        case Algorithm::kSkeletonRendezvous:
          // A backend with k points owns a sum of k of the P arcs (skeleton: of k cluster
          // shares, relative sd ~0.65 each, docs/algorithms.md): relative sd ~ 1/sqrt(k).
          tolerance = 4.0 * expected / std::sqrt(160.0 * weights[i]);
          break;
        case Algorithm::kRendezvous:
          // Estimated from 65536 sampled hashes: binomial sd.
          tolerance = 5.0 * std::sqrt(expected * (1 - expected) / 65536);
          break;
        case Algorithm::kMaglev:
          // Turns are exact per round; the last partial round and the fill order leave each
          // backend within N + 2 entries of M * w / W.
          tolerance = (weights.size() + 2.0) / 65537;
          break;
      }
      CAPTURE(i);
      CHECK(std::abs(shares[i] - expected) <= tolerance);
      // The reported shares predict where sampled keys actually go.
      const double sd = std::sqrt(shares[i] * (1 - shares[i]) / kSamples);
      CHECK(std::abs(counts[i] / double(kSamples) - shares[i]) <= 5 * sd + 5.0 / 65536);
      sum += shares[i];
    }
    CHECK(sum == doctest::Approx(1.0).epsilon(1e-9));
  }
}

// Keys that moved between two selectors over sets sharing ids; `moved_to` counts destinations.
struct Movement {
  int moved = 0;
  int moved_elsewhere = 0;  // moved, but not to/from the backend being added/removed
};

Movement compare(const BackendSet& sa, const Selector& a, const BackendSet& sb, const Selector& b,
                 const std::string& changed_id, int keys) {
  Movement m;
  for (int k = 0; k < keys; ++k) {
    const uint64_t h = fast_key(k, 4242);
    const std::string& before = sa[a.owner(h)].id;
    const std::string& after = sb[b.owner(h)].id;
    if (before == after) continue;
    ++m.moved;
    if (before != changed_id && after != changed_id) ++m.moved_elsewhere;
  }
  return m;
}

TEST_CASE(
    "Adding one backend to K moves about 1/(K+1) of keys, only to it; removing moves only its "
    "keys") {
  constexpr int kKeys = 200000;
  for (Algorithm algo : kAllAlgorithms) {
    for (size_t k : {5, 10, 30}) {
      CAPTURE(name(algo));
      CAPTURE(k);
      std::vector<BackendSpec> grown = test::specs(k + 1);
      std::vector<BackendSpec> base(grown.begin(), grown.begin() + static_cast<long>(k));
      const std::string added = grown.back().id;
      const BackendSet s0 = make_set(base);
      const BackendSet s1 = make_set(grown);
      const Selector a = make_selector(s0, algo);
      const Selector b = make_selector(s1, algo);
      const Movement add = compare(s0, a, s1, b, added, kKeys);
      const double p = 1.0 / (k + 1);
      const double frac = add.moved / double(kKeys);
      // The sampling part of the spread (binomial), plus for the ring and the skeleton the new
      // backend's own share spread (160 points: relative sd 1/sqrt(160)).
      const double sampling_sd = std::sqrt(p * (1 - p) / kKeys);
      if (algo == Algorithm::kMaglev) {
        // Maglev is not minimal: measure the extra movement (keys moving between two old
        // backends) and bound it. The paper (NSDI 2016, section 3.4) calls it small next to
        // the ideal; we require it below a quarter of the ideal 1/(K+1).
        MESSAGE(name(algo), " K=", k, " moved ", frac, " ideal ", p, " extra ",
                add.moved_elsewhere / double(kKeys));
        CHECK(frac >= p - 5 * sampling_sd);
        CHECK(add.moved_elsewhere / double(kKeys) <= p / 4);
      } else {
        // Skeleton: the new backend's 160 cluster shares, relative sd ~0.65 each.
        const double share_sd = algo == Algorithm::kRing                 ? p / std::sqrt(160.0)
                                : algo == Algorithm::kSkeletonRendezvous ? 0.7 * p / std::sqrt(160.0)
                                                                         : 0.0;
        CHECK(add.moved_elsewhere == 0);
        CHECK(std::abs(frac - p) <= 5 * sampling_sd + 4 * share_sd);
      }

      // Removing: the reverse direction. Only keys owned by the removed backend move.
      const Movement remove = compare(s1, b, s0, a, added, kKeys);
      if (algo != Algorithm::kMaglev) {
        CHECK(remove.moved_elsewhere == 0);
        CHECK(remove.moved == add.moved);
      } else {
        CHECK(remove.moved_elsewhere / double(kKeys) <= p / 4);
      }
    }
  }
}

TEST_CASE("Removing a key's owner promotes its second choice (ring, rendezvous)") {
  const std::vector<BackendSpec> all = test::specs(12, {1, 2, 3});
  const BackendSet s_all = make_set(all);
  for (Algorithm algo : {Algorithm::kRing, Algorithm::kRendezvous}) {
    CAPTURE(name(algo));
    const Selector full = make_selector(s_all, algo);
    for (size_t removed = 0; removed < all.size(); removed += 5) {
      std::vector<BackendSpec> rest = all;
      rest.erase(rest.begin() + static_cast<long>(removed));
      const BackendSet s_rest = make_set(rest);
      const Selector less = make_selector(s_rest, algo);
      std::vector<BackendIndex> pref(2);
      int checked = 0;
      for (uint64_t k = 0; k < 20000; ++k) {
        const uint64_t h = fast_key(k, 5);
        REQUIRE(full.preference(h, pref) == 2);
        if (pref[0] != removed) continue;
        ++checked;
        CHECK(s_rest[less.owner(h)].id == s_all[pref[1]].id);
      }
      CHECK(checked > 0);
    }
  }
}

// The whole preference order of keys 0..1999, folded into one number (FNV-1a over the indices).
uint64_t order_digest(const Selector& sel) {
  uint64_t d = 0xcbf29ce484222325u;
  for (uint64_t k = 0; k < 2000; ++k) {
    for (BackendIndex b : full_order(sel, test::key_hash(k))) d = (d ^ b) * 0x100000001b3u;
  }
  return d;
}

TEST_CASE("Maglev and skeleton walks: pinned preference orders (owner, probes, final scan)") {
  // A refactor of the shared rehash walk (rehash_walk.h) must not move a fallback: the first
  // order in full, and a digest of 2000 whole orders. Maglev with M = 11 over 10 backends
  // leaves backends to the final scan (weights 1 and 2 share 11 entries).
  const BackendSet set = make_set(test::specs(10, {1, 2}));
  SelectorOptions tiny;
  tiny.maglev_table_size = 11;
  const Selector cases[] = {make_selector(set, Algorithm::kMaglev),
                            make_selector(set, Algorithm::kMaglev, tiny),
                            make_selector(set, Algorithm::kSkeletonRendezvous)};
  const char* first[] = {"6 1 7 4 3 5 8 9 0 2 ", "1 9 3 2 5 0 7 4 6 8 ", "1 5 6 3 9 7 4 0 8 2 "};
  const uint64_t digest[] = {17162568509171586425u, 5171813913798494893u, 2335809235250192409u};
  for (size_t i = 0; i < 3; ++i) {
    std::string got;
    for (BackendIndex b : full_order(cases[i], test::key_hash(0))) got += std::to_string(b) + " ";
    CHECK(got == first[i]);
    CHECK(order_digest(cases[i]) == digest[i]);
  }
}

TEST_CASE("Selector reports its size") {
  const BackendSet set = make_set(test::specs(100));
  const Selector ring = make_selector(set, Algorithm::kRing);
  CHECK(ring.points() == 16000);
  CHECK(ring.memory_bytes() >= 16000 * 6);
  CHECK(ring.memory_bytes() <= 16000 * 6 + 64);
  CHECK(ring.algorithm() == Algorithm::kRing);
  const Selector mg = make_selector(set, Algorithm::kMaglev);
  CHECK(mg.points() == 65537);
  CHECK(mg.memory_bytes() >= 65537 * 2);
  CHECK(mg.memory_bytes() <= 65537 * 2 + 100 * 2 + 64);
  const Selector hrw = make_selector(set, Algorithm::kRendezvous);
  CHECK(hrw.points() == 0);
  CHECK(hrw.memory_bytes() <= 100 * 18 + 64);
  CHECK(hrw.scratch_words() == 2 + 100);
  CHECK(ring.scratch_words() == 2);
}

}  // namespace
}  // namespace rondel::core
