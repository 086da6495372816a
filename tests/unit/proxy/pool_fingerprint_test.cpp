// Pool::placement_fingerprint and the admin health flag: the digest depends on the placement
// (ids, weights, algorithm and its size, usable backends) and on nothing else (config order,
// addresses), and kAdminDown takes a backend out of the pick like the other health sources.
#include <doctest/doctest.h>

#include <algorithm>

#include "rondel/core/bitset.h"
#include "router_fixture.h"

namespace rondel::proxy {
namespace {

using test::pool_config;
using test::PoolMaker;

uint64_t fingerprint(const config::PoolConfig& cfg) {
  PoolMaker m;
  auto pool = m.build(cfg);
  REQUIRE(pool);
  return pool->placement_fingerprint();
}

TEST_CASE("the fingerprint ignores config order and addresses") {
  auto a = pool_config({"a", "b", "c", "d"}, {1, 2, 3, 4});
  auto b = pool_config({"d", "b", "a", "c"}, {4, 2, 1, 3});  // same placement, other order
  for (auto& be : b.backends) be.address.port = static_cast<uint16_t>(be.address.port + 100);
  CHECK(fingerprint(a) == fingerprint(b));
  // Known answer: the digest of this placement must not change silently (other instances and
  // older versions compare against it).
  CHECK(fingerprint(a) == 0x4ffad65bed0f9918ull);
}

TEST_CASE("the fingerprint changes with what places keys") {
  const auto base = pool_config({"a", "b", "c"});
  const uint64_t fp = fingerprint(base);
  CHECK(fingerprint(pool_config({"a", "b", "c"}, {1, 1, 2})) != fp);  // a weight
  CHECK(fingerprint(pool_config({"a", "b", "x"})) != fp);             // an id
  CHECK(fingerprint(pool_config({"a", "b"})) != fp);                  // a backend fewer
  auto ring = base;
  ring.points_per_weight = base.points_per_weight / 2;
  CHECK(fingerprint(ring) != fp);
  auto maglev = base;
  maglev.algorithm = config::Algorithm::kMaglev;
  const uint64_t fm = fingerprint(maglev);
  CHECK(fm != fp);
  auto maglev_points = maglev;
  maglev_points.points_per_weight = 7;  // not a maglev parameter
  CHECK(fingerprint(maglev_points) == fm);
  maglev.maglev_table_size = 251;
  CHECK(fingerprint(maglev) != fm);
  // The key seed moves every key: a different digest (found by the discovery work: it did not).
  auto seeded = base;
  seeded.seed = 42;
  CHECK(fingerprint(seeded) != fp);
  seeded.seed = 43;
  CHECK(fingerprint(seeded) != fingerprint([&] { auto c = base; c.seed = 42; return c; }()));
  // Skeleton rendezvous has points too.
  auto skel = base;
  skel.algorithm = config::Algorithm::kSkeletonRendezvous;
  auto skel_points = skel;
  skel_points.points_per_weight = base.points_per_weight / 2;
  CHECK(fingerprint(skel_points) != fingerprint(skel));
  // A migration in progress places part of the keys by the previous placement.
  auto migrating = base;
  migrating.previous.present = true;
  migrating.previous.algorithm = config::Algorithm::kMaglev;
  migrating.previous.backends = {{"a", 1, {}}, {"b", 1, {}}};
  migrating.migrate_percent = 50;
  const uint64_t fmig = fingerprint(migrating);
  CHECK(fmig != fp);
  migrating.migrate_percent = 60;
  CHECK(fingerprint(migrating) != fmig);
  migrating.migrate_percent = 100;  // done: the previous placement no longer places a key
  CHECK(fingerprint(migrating) == fp);
  // Ids are length-prefixed: {"ab","c"} is not {"a","bc"}.
  CHECK(fingerprint(pool_config({"ab", "c"})) != fingerprint(pool_config({"a", "bc"})));
}

TEST_CASE("the fingerprint follows usability, whichever source set the flag") {
  PoolMaker m;
  auto pool = m.build(pool_config({"a", "b", "c"}));
  REQUIRE(pool);
  const uint64_t up = pool->placement_fingerprint();
  auto& b = pool->backend(1);
  CHECK(b.set_admin_state(AdminState::kDrain));
  CHECK_FALSE(b.usable());
  CHECK(b.has_flag(HealthFlag::kAdminDown));
  CHECK(b.health() == Health::kUp);  // health is the checks' summary; admin_state is separate
  const uint64_t drained = pool->placement_fingerprint();
  CHECK(drained != up);
  CHECK_FALSE(b.set_admin_state(AdminState::kDrain));  // no change
  CHECK(b.set_admin_state(AdminState::kMaint));
  CHECK(pool->placement_fingerprint() == drained);  // both are "not usable"
  b.set_flag(HealthFlag::kFailedActiveCheck);
  CHECK(b.set_admin_state(AdminState::kReady));
  CHECK_FALSE(b.usable());  // the active check still holds it down
  CHECK(pool->placement_fingerprint() == drained);
  b.clear_flag(HealthFlag::kFailedActiveCheck);
  CHECK(pool->placement_fingerprint() == up);
  CHECK(pool->state().unusable.load() == 0);
}

TEST_CASE("a drained backend is excluded from the pick") {
  PoolMaker m;
  auto pool = m.build(pool_config({"a", "b", "c", "d"}));
  REQUIRE(pool);
  std::vector<uint64_t> scratch(pool->scratch_words());
  pool->backend(2).set_admin_state(AdminState::kDrain);
  core::PickInput in;
  pool->pick_input(in, {}, std::span<uint64_t>(scratch.data(), pool->excluded_words()));
  REQUIRE_FALSE(in.excluded.empty());
  CHECK(core::bit_test(in.excluded, 2));
  CHECK(in.total_weight == 3 * Pool::kWeightScale);  // W counts the usable backends only
  CHECK(pool->eligible_count() == 3);
  CHECK(pool->least_loaded({}) != 2);
}

}  // namespace
}  // namespace rondel::proxy
