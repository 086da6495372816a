// Gradual migration (core/migration.h): raising P moves P% of the keys whose two homes differ,
// in steps, and never moves a key back to its old home.
#include "rondel/core/migration.h"

#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core_test_util.h"

namespace rondel::core {
namespace {

std::vector<BackendSpec> specs(int n) {
  std::vector<BackendSpec> s;
  for (int i = 0; i < n; ++i) s.push_back({"cache-" + std::to_string(i), 1});
  return s;
}

// For P = 0, 10, ..., 100: the share of keys whose home at P differs from their home at P = 0
// is within 10% of P% x (the share whose old and new homes differ), and a key once on its new
// home stays there. N keys, D of them with differing homes: at P = 10 the moved count is
// binomial(D, 0.1), sd = 0.3 sqrt(D); with D >= 36,000 the 10% margin is >= 6 sd (these hashes
// are fixed, so the outcome is too; for a random key set the failure probability is < 1e-8).
void check_migration(const Selector& old_sel, const Selector& new_sel, size_t n) {
  std::vector<uint64_t> hashes(n);
  std::vector<BackendIndex> old_home(n), new_home(n), last(n);
  size_t differ = 0;
  for (size_t i = 0; i < n; ++i) {
    hashes[i] = hash64("/object/" + std::to_string(i));
    old_home[i] = old_sel.owner(hashes[i]);
    new_home[i] = new_sel.owner(hashes[i]);
    last[i] = old_home[i];
    differ += old_home[i] != new_home[i];
  }
  REQUIRE(differ >= 36000);
  for (uint32_t p = 0; p <= 100; p += 10) {
    size_t moved = 0, returned = 0;
    for (size_t i = 0; i < n; ++i) {
      const Selector& sel =
          placement_of(hashes[i], p) == PlacementVersion::kCurrent ? new_sel : old_sel;
      const BackendIndex home = sel.owner(hashes[i]);
      moved += home != old_home[i];
      returned += last[i] != old_home[i] && home == old_home[i];
      last[i] = home;
    }
    const double want = p / 100.0 * static_cast<double>(differ);
    INFO("P=" << p << " moved=" << moved << " want=" << want << " differ=" << differ);
    CHECK(std::abs(static_cast<double>(moved) - want) <= 0.1 * want);
    CHECK(returned == 0);
  }
}

}  // namespace

TEST_CASE("migration_threshold: P% of the 64-bit hash space, every key at 100") {
  CHECK(migration_threshold(0) == 0);
  CHECK(migration_threshold(50) == uint64_t{1} << 63);
  CHECK(placement_of(12345, 0) == PlacementVersion::kPrevious);
  CHECK(placement_of(12345, 100) == PlacementVersion::kCurrent);
  // The split is by the migration hash: a key is current once P passes its own point.
  const uint64_t h = hash64("/k");
  const uint64_t m = mix64(h, kMigrationSalt);
  const uint32_t point = static_cast<uint32_t>((static_cast<unsigned __int128>(m) * 100) >> 64);
  CHECK(placement_of(h, point) == PlacementVersion::kPrevious);
  CHECK(placement_of(h, point + 1) == PlacementVersion::kCurrent);
  for (uint32_t p = 1; p < 100; ++p) CHECK(migration_threshold(p) > migration_threshold(p - 1));
}

TEST_CASE("migration, one backend added (ring 10 -> 11): moves in proportion, never back") {
  const BackendSet old_set = test::make_set(specs(10));
  const BackendSet new_set = test::make_set(specs(11));
  const Selector old_sel = test::make_selector(old_set, Algorithm::kRing);
  const Selector new_sel = test::make_selector(new_set, Algorithm::kRing);
  check_migration(old_sel, new_sel, 400000);  // ~1/11 differ: D ~ 36,400
}

TEST_CASE("migration, algorithm change (ring -> maglev, same 10 backends)") {
  const BackendSet set = test::make_set(specs(10));
  const Selector old_sel = test::make_selector(set, Algorithm::kRing);
  const Selector new_sel = test::make_selector(set, Algorithm::kMaglev);
  check_migration(old_sel, new_sel, 60000);  // ~90% differ
}

}  // namespace rondel::core
