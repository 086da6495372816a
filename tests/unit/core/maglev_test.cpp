// Maglev table options, fill balance and fallback walk.
#include "rondel/core/maglev.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core_test_util.h"
#include "rondel/core/selector.h"

namespace rondel::core {
namespace {

using test::make_selector;
using test::make_set;

TEST_CASE("Maglev table size must be prime, large enough and bounded") {
  CHECK(Maglev::is_prime(2));
  CHECK(Maglev::is_prime(65537));
  CHECK(Maglev::is_prime(655373));
  CHECK_FALSE(Maglev::is_prime(0));
  CHECK_FALSE(Maglev::is_prime(1));
  CHECK_FALSE(Maglev::is_prime(65536));
  CHECK_FALSE(Maglev::is_prime(65539 * 3));

  const BackendSet set = make_set(test::specs(10));
  SelectorOptions o;
  o.algorithm = Algorithm::kMaglev;
  o.maglev_table_size = 65536;
  auto not_prime = Selector::build(set, o);
  REQUIRE_FALSE(not_prime.has_value());
  CHECK(not_prime.error().message == "maglev table size 65536 is not prime");

  o.maglev_table_size = 7;
  auto small = Selector::build(set, o);
  REQUIRE_FALSE(small.has_value());
  CHECK(small.error().message ==
        "maglev table size 7 is smaller than the number of backends with weight > 0 (10)");

  o.maglev_table_size = 16777259;  // prime, above the limit
  auto big = Selector::build(set, o);
  REQUIRE_FALSE(big.has_value());
  CHECK(big.error().message == "maglev table size 16777259 exceeds 16777216");

  o.maglev_table_size = 11;  // M >= N is enough: every backend gets an entry
  const Selector tiny = make_selector(set, Algorithm::kMaglev, o);
  const std::vector<double> shares = tiny.key_shares();
  for (double s : shares) CHECK(s > 0.0);
}

TEST_CASE("Maglev fills the table evenly for equal weights (paper: near-perfect balance)") {
  const BackendSet set = make_set(test::specs(100));
  const Selector sel = make_selector(set, Algorithm::kMaglev);
  std::vector<size_t> entries(100, 0);
  for (BackendIndex b : sel.maglev()->table()) {
    REQUIRE(b < 100);
    ++entries[b];
  }
  const auto [lo, hi] = std::minmax_element(entries.begin(), entries.end());
  MESSAGE("maglev entries per backend: min ", *lo, " max ", *hi, " ideal ", 65537 / 100.0);
  // Round-robin turns: every backend gets floor(M/N) or one more entry.
  CHECK(*lo >= 65537 / 100);
  CHECK(*hi <= 65537 / 100 + 1);
}

TEST_CASE("Maglev fallback order: owner, then rehash probes, each backend once, bounded") {
  const BackendSet set = make_set(test::specs(64, {1, 2}));
  const Selector sel = make_selector(set, Algorithm::kMaglev);
  std::vector<uint64_t> scratch(sel.scratch_words());
  // Second choices follow table shares (weights 1:2), not a fixed neighbour.
  std::vector<int> second(64, 0);
  constexpr int kKeys = 60000;
  for (int k = 0; k < kKeys; ++k) {
    Selector::Cursor c = sel.cursor(test::fast_key(static_cast<uint64_t>(k), 3), scratch);
    c.next();
    ++second[c.next()];
  }
  double light = 0;
  double heavy = 0;
  for (size_t i = 0; i < 64; ++i)
    (set[static_cast<BackendIndex>(i)].weight == 1 ? light : heavy) += second[i];
  // Expected heavy : light = 2 : 1 (minus the owner's own share), well within 10%.
  CHECK(heavy / light == doctest::Approx(2.0).epsilon(0.1));
}

}  // namespace
}  // namespace rondel::core
