// build_placement, the one placement builder of Pool::build and the reload dry-run: ids, the
// placeholder of a pool without backends, the pool's own selector options, errors by pool name;
// and config reading core's algorithm names.
#include "rondel/proxy/placement.h"

#include <doctest/doctest.h>

#include "router_fixture.h"

namespace rondel::proxy {
namespace {

using test::pool_config;

TEST_CASE("build_placement: the pool's ids (address when unset), options and placeholder") {
  auto cfg = pool_config({"a", ""}, {1, 3});
  cfg.algorithm = core::Algorithm::kMaglev;
  cfg.maglev_table_size = 11;
  auto p = build_placement(cfg);
  REQUIRE(p);
  REQUIRE(p->set.size() == 2);
  CHECK(p->set[0].id == "a");
  CHECK(p->set[1].id == "127.0.0.1:9002");
  CHECK(p->set[1].weight == 3);
  CHECK(p->selector.algorithm() == core::Algorithm::kMaglev);
  CHECK(p->selector.points() == 11);

  auto none = build_placement(pool_config({}));
  REQUIRE(none);
  CHECK(none->set.size() == 1);  // the placeholder: the pool exists, every pick finds no backend
  CHECK(none->set[0].id == "(no backend)");
}

TEST_CASE("build_placement: errors name the pool") {
  auto cfg = pool_config({"a", "b", "c"});
  cfg.algorithm = core::Algorithm::kMaglev;
  cfg.maglev_table_size = 2;
  auto p = build_placement(cfg);
  REQUIRE_FALSE(p);
  CHECK(p.error().message ==
        "pool p: maglev table size 2 is smaller than the number of backends with weight > 0 (3)");
}

TEST_CASE("each placement choice has one name, in value order") {
  CHECK(core::name_of(core::Algorithm::kSkeletonRendezvous) == "skeleton_rendezvous");
  CHECK(core::name_of(core::ProbeOrder::kRandom) == "random");
  CHECK(core::name_of(core::ReplicaChoice::kRoundRobin) == "round_robin");
}

}  // namespace
}  // namespace rondel::proxy
