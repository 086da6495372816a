// PlacementDiff: the sampled move matrix and the ideal share behind the reload dry-run.
#include "rondel/core/placement_diff.h"

#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core_test_util.h"

namespace rondel::core {
namespace {

using test::make_selector;
using test::make_set;

TEST_CASE("ideal moved share: total variation distance of the weight shares, by id") {
  const auto ten = test::specs(10);
  CHECK(ideal_moved_share(ten, ten) == 0.0);
  CHECK(ideal_moved_share(ten, test::specs(11)) == doctest::Approx(1.0 / 11));
  CHECK(ideal_moved_share(test::specs(11), ten) == doctest::Approx(1.0 / 11));
  auto heavier = ten;
  heavier[3].weight = 3;  // 1/10 each -> 3/12 and 1/12: the nine others lose 1/10 - 1/12 each
  CHECK(ideal_moved_share(ten, heavier) == doctest::Approx(9 * (0.1 - 1.0 / 12)));
  auto renamed = ten;
  renamed[4].id = "elsewhere:80";
  CHECK(ideal_moved_share(ten, renamed) == doctest::Approx(0.1));
  auto reordered = ten;
  std::swap(reordered[0], reordered[9]);
  CHECK(ideal_moved_share(ten, reordered) == 0.0);
}

TEST_CASE("diff: nothing moves between equal placements; an added backend only takes keys") {
  const BackendSet a = make_set(test::specs(10));
  const Selector sa = make_selector(a, Algorithm::kRing);
  const PlacementDiff same = diff_placements(a, sa, a, sa, 1 << 16);
  CHECK(same.moved == 0.0);
  CHECK(same.moves.empty());

  const BackendSet b = make_set(test::specs(11));
  const Selector sb = make_selector(b, Algorithm::kRing);
  const PlacementDiff grown = diff_placements(a, sa, b, sb, 1 << 18);
  CHECK(grown.samples == 1u << 18);
  const std::string added = b[10].id;
  double total = 0;
  for (const MoveShare& m : grown.moves) {
    CHECK(m.to == added);
    total += m.share;
  }
  CHECK(total == doctest::Approx(grown.moved));
  // The new backend's ring share (160 points: relative sd 1/sqrt(160)) within 4 sd.
  CHECK(grown.moved == doctest::Approx(1.0 / 11).epsilon(4 / std::sqrt(160.0)));
  CHECK(grown.moved_stderr == doctest::Approx(std::sqrt(grown.moved * (1 - grown.moved) /
                                                        (1 << 18))));
  for (size_t i = 1; i < grown.moves.size(); ++i) {
    CHECK(grown.moves[i - 1].share >= grown.moves[i].share);
  }
}

TEST_CASE("diff: an algorithm change moves almost everything, between every pair") {
  const BackendSet a = make_set(test::specs(8));
  const Selector ring = make_selector(a, Algorithm::kRing);
  const Selector maglev = make_selector(a, Algorithm::kMaglev);
  const PlacementDiff d = diff_placements(a, ring, a, maglev, 1 << 16);
  // Independent placements over 8 equal backends agree on a key with probability ~1/8.
  CHECK(d.moved == doctest::Approx(7.0 / 8).epsilon(0.05));
  CHECK(d.moves.size() == 56);
}

}  // namespace
}  // namespace rondel::core
