// Subsets through Router::route (pool `subsets`, backend `labels`): selection by listener,
// header and path prefix; a subset's keys land where a pool of its members alone would place
// them; the bound, retries and least-loaded picks stay inside the subset; no member up: 503
// counted per subset.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "rondel/core/bitset.h"
#include "rondel/core/hash.h"
#include "rondel/proxy/router.h"
#include "router_fixture.h"

namespace rondel::proxy {
namespace {

config::SubsetRule rule(config::SubsetMatch m, std::string what, std::vector<std::string> require,
                        std::string value = {}) {
  config::SubsetRule r;
  r.match = m;
  r.what = std::move(what);
  r.value = std::move(value);
  r.require = std::move(require);
  r.name = r.what;
  return r;
}

// Six backends a..f; a, c, e carry `pci`; c, d carry `ssd`.
config::PoolConfig labelled(config::Algorithm algo) {
  config::PoolConfig cfg = test::pool_config({"a", "b", "c", "d", "e", "f"});
  cfg.algorithm = algo;
  cfg.points_per_weight = 160;
  cfg.backends[0].labels = {"pci"};
  cfg.backends[2].labels = {"pci", "ssd"};
  cfg.backends[3].labels = {"ssd"};
  cfg.backends[4].labels = {"pci"};
  cfg.subsets.push_back(rule(config::SubsetMatch::kListener, "secure", {"pci"}));
  cfg.subsets.push_back(rule(config::SubsetMatch::kHeader, "X-Tier", {"ssd"}, "fast"));
  cfg.subsets.push_back(rule(config::SubsetMatch::kPathPrefix, "/cards/", {"pci", "ssd"}));
  return cfg;
}

RouteDecision pick(Router& router, const Pool& pool, const std::string& key, uint8_t subset,
                   std::span<const uint64_t> tried = {}) {
  std::vector<uint64_t> scratch(pool.scratch_words());
  PickRequest rq;
  rq.key = RouteKey{RouteKey::Kind::kKey, core::hash64(key), key};
  rq.subset = subset;
  rq.tried = tried;
  return router.route(pool, rq, scratch);
}

TEST_CASE("select_subset: listener, header value, path prefix; first match wins; else none") {
  test::PoolMaker maker;
  auto pool = maker.build(labelled(config::Algorithm::kRing));
  REQUIRE(pool);
  REQUIRE(pool->subset_count() == 3);
  CHECK(pool->subset(0).size() == 3);  // a, c, e
  CHECK(pool->subset(1).size() == 2);  // c, d
  CHECK(pool->subset(2).size() == 1);  // c
  test::Request plain("/x");
  CHECK(pool->select_subset("main", plain.head) == Pool::kNoSubset);
  CHECK(pool->select_subset("secure", plain.head) == 0);
  test::Request fast("/x", "x-tier", "fast");  // header names compare without case
  CHECK(pool->select_subset("main", fast.head) == 1);
  CHECK(pool->select_subset("secure", fast.head) == 0);  // first match wins
  test::Request slow("/x", "X-Tier", "Fast");            // values compare exactly
  CHECK(pool->select_subset("main", slow.head) == Pool::kNoSubset);
  test::Request cards("/cards/1?x=2");
  CHECK(pool->select_subset("main", cards.head) == 2);
  test::Request absolute("http://h/cards/1");  // absolute form: its origin form's path
  CHECK(pool->select_subset("main", absolute.head) == 2);
  test::Request other("/card");
  CHECK(pool->select_subset("main", other.head) == Pool::kNoSubset);
}

TEST_CASE("a subset's keys land where a pool of its members alone places them (ring, rendezvous)") {
  for (config::Algorithm algo : {config::Algorithm::kRing, config::Algorithm::kRendezvous}) {
    test::PoolMaker maker, alone_maker;
    auto pool = maker.build(labelled(algo));
    config::PoolConfig members = test::pool_config({"a", "c", "e"});
    members.algorithm = algo;
    members.points_per_weight = 160;
    auto alone = alone_maker.build(members);
    REQUIRE(pool);
    REQUIRE(alone);
    Router router, alone_router;
    for (int i = 0; i < 2000; ++i) {
      const std::string key = "/k/" + std::to_string(i);
      const RouteDecision d = pick(router, *pool, key, 0);
      const RouteDecision e = pick(alone_router, *alone, key, Pool::kNoSubset);
      REQUIRE(d.backend != core::kNoBackend);
      CHECK(pool->backend(d.backend).id() == alone->backend(e.backend).id());
      CHECK(d.owner == d.backend);  // the subset's own owner: no spill counted
      CHECK(Router::explain(*pool, core::hash64(key), 0).backend == d.backend);
    }
    CHECK(pool->subset_counters(0).requests.load() == 2000);
  }
}

TEST_CASE("the bound is over the subset's members: a full owner spills to a member only") {
  test::PoolMaker maker;
  config::PoolConfig cfg = labelled(config::Algorithm::kRing);
  cfg.hot_keys.share = 0;
  cfg.spill_memory = 0;
  auto pool = maker.build(cfg);
  REQUIRE(pool);
  Router router;
  // Find a key owned by c in the ssd subset (c, d).
  std::string key;
  for (int i = 0; key.empty(); ++i) {
    const std::string k = "/hot/" + std::to_string(i);
    if (pool->backend(pick(router, *pool, k, 1).backend).id() == "c") key = k;
  }
  // Non-members carry a large load: over the whole pool c would have room (cap ~100), over
  // the subset (total 40, W 2) c's cap is 1.25 * 41 / 2 + 8 < 40.
  for (core::BackendIndex i : {0, 1, 4, 5}) test::set_in_flight(*pool, i, 100);
  test::set_in_flight(*pool, 2, 40);
  const RouteDecision whole = pick(router, *pool, key, Pool::kNoSubset);
  const RouteDecision d = pick(router, *pool, key, 1);
  CHECK(pool->backend(d.backend).id() == "d");
  CHECK(d.reason == core::RouteReason::kSpill);
  CHECK(pool->backend(whole.backend).id() != "d");  // the pool-wide bound would not spill there
  CHECK(Router::explain(*pool, core::hash64(key), 1).backend == d.backend);
}

TEST_CASE("retries, least-loaded picks and down members stay inside the subset; none up: 503") {
  test::PoolMaker maker;
  auto pool = maker.build(labelled(config::Algorithm::kRing));
  REQUIRE(pool);
  Router router;
  std::vector<uint64_t> tried(pool->excluded_words(), 0);
  for (int i = 0; i < 50; ++i) {
    const std::string key = "/r/" + std::to_string(i);
    std::fill(tried.begin(), tried.end(), 0);
    const RouteDecision first = pick(router, *pool, key, 1);
    core::bit_set(tried, first.backend);
    const RouteDecision retry = pick(router, *pool, key, 1, tried);
    REQUIRE(retry.backend != core::kNoBackend);
    CHECK(pool->subset(1).contains(retry.backend));
    CHECK(retry.backend != first.backend);
    core::bit_set(tried, retry.backend);
    CHECK(pick(router, *pool, key, 1, tried).backend == core::kNoBackend);  // both tried
  }
  std::vector<uint64_t> scratch(pool->scratch_words());
  PickRequest ll;  // no key: least loaded, inside the subset
  ll.subset = 2;
  for (core::BackendIndex i : {0, 1, 3, 4, 5}) test::set_in_flight(*pool, i, 0);
  test::set_in_flight(*pool, 2, 9);
  CHECK(pool->backend(router.route(*pool, ll, scratch).backend).id() == "c");
  // c down: the path subset (c alone) has no member up.
  pool->backend(2).set_flag(HealthFlag::kFailedActiveCheck);
  const uint64_t before = pool->subset_counters(2).unavailable.load();
  CHECK(pick(router, *pool, "/cards/x", 2).backend == core::kNoBackend);
  CHECK(pool->subset_counters(2).unavailable.load() == before + 1);
  const RouteDecision d = pick(router, *pool, "/cards/x", 1);  // ssd: d is left
  CHECK(pool->backend(d.backend).id() == "d");
}

}  // namespace
}  // namespace rondel::proxy
