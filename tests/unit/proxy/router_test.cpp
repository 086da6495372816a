// Router: the hash policy, route state and pick as the data path and /api/route run them.
#include <doctest/doctest.h>

#include <mutex>
#include <string>
#include <vector>

#include "rondel/core/bitset.h"
#include "rondel/core/hash.h"
#include "rondel/proxy/router.h"
#include "router_fixture.h"

namespace rondel::proxy {
namespace {

using config::Algorithm;
using config::HashKeyKind;

struct PinnedRoute {
  Algorithm algorithm;
  HashKeyKind kind;
  const char* name;     // header, cookie or query parameter
  const char* target;
  const char* header;   // nullptr: no header
  const char* value;
  const char* client_ip;
  const char* backend;  // where the key goes with no load
};

// Generated from the code before Router existed (Pool::route over extract_key + hash64, main at
// 4a463f2): a refactor must not move any of these keys. Five backends, weights 1 1 2 1 1.
constexpr PinnedRoute kPinned[] = {
    {Algorithm::kRing, HashKeyKind::kUri, "", "/obj/1", nullptr, nullptr, "", "cache-c"},
    {Algorithm::kRing, HashKeyKind::kUri, "", "/obj/8", nullptr, nullptr, "", "cache-e"},
    {Algorithm::kRing, HashKeyKind::kUri, "", "/obj/15", nullptr, nullptr, "", "cache-d"},
    {Algorithm::kRing, HashKeyKind::kUri, "", "/obj/22", nullptr, nullptr, "", "cache-c"},
    {Algorithm::kRing, HashKeyKind::kUri, "", "/obj/29", nullptr, nullptr, "", "cache-c"},
    {Algorithm::kRing, HashKeyKind::kUri, "", "/obj/36", nullptr, nullptr, "", "cache-c"},
    {Algorithm::kRing, HashKeyKind::kUri, "", "/obj/43", nullptr, nullptr, "", "cache-b"},
    {Algorithm::kRing, HashKeyKind::kUri, "", "/obj/50", nullptr, nullptr, "", "cache-b"},
    {Algorithm::kRing, HashKeyKind::kUri, "", "/video/seg-0001.ts?bitrate=high", nullptr, nullptr, "", "cache-b"},
    {Algorithm::kRing, HashKeyKind::kPath, "", "/video/seg-0001.ts?bitrate=high", nullptr, nullptr, "", "cache-c"},
    {Algorithm::kRing, HashKeyKind::kPath, "", "/img/logo.png", nullptr, nullptr, "", "cache-d"},
    {Algorithm::kRing, HashKeyKind::kHeader, "x-tenant", "/", "X-Tenant", "acme", "", "cache-d"},
    {Algorithm::kRing, HashKeyKind::kHeader, "x-tenant", "/", "x-tenant", "globex", "", "cache-c"},
    {Algorithm::kRing, HashKeyKind::kCookie, "sid", "/", "Cookie", "a=1; sid=u-42; b=2", "", "cache-e"},
    {Algorithm::kRing, HashKeyKind::kCookie, "sid", "/", "Cookie", "sid=\"u-77\"", "", "cache-d"},
    {Algorithm::kRing, HashKeyKind::kQuery, "id", "/get?x=1&id=9931", nullptr, nullptr, "", "cache-d"},
    {Algorithm::kRing, HashKeyKind::kQuery, "id", "/get?id=abc", nullptr, nullptr, "", "cache-e"},
    {Algorithm::kRing, HashKeyKind::kSrc, "", "/", nullptr, nullptr, "10.1.2.3", "cache-c"},
    {Algorithm::kRing, HashKeyKind::kSrc, "", "/", nullptr, nullptr, "192.168.7.20", "cache-b"},
    {Algorithm::kRing, HashKeyKind::kSrc, "", "/", nullptr, nullptr, "2001:db8::5", "cache-b"},
    {Algorithm::kRendezvous, HashKeyKind::kUri, "", "/obj/1", nullptr, nullptr, "", "cache-d"},
    {Algorithm::kRendezvous, HashKeyKind::kUri, "", "/obj/8", nullptr, nullptr, "", "cache-a"},
    {Algorithm::kRendezvous, HashKeyKind::kUri, "", "/obj/15", nullptr, nullptr, "", "cache-d"},
    {Algorithm::kRendezvous, HashKeyKind::kUri, "", "/obj/22", nullptr, nullptr, "", "cache-b"},
    {Algorithm::kRendezvous, HashKeyKind::kUri, "", "/obj/29", nullptr, nullptr, "", "cache-e"},
    {Algorithm::kRendezvous, HashKeyKind::kUri, "", "/obj/36", nullptr, nullptr, "", "cache-d"},
    {Algorithm::kRendezvous, HashKeyKind::kUri, "", "/obj/43", nullptr, nullptr, "", "cache-c"},
    {Algorithm::kRendezvous, HashKeyKind::kUri, "", "/obj/50", nullptr, nullptr, "", "cache-d"},
    {Algorithm::kRendezvous, HashKeyKind::kUri, "", "/video/seg-0001.ts?bitrate=high", nullptr, nullptr, "", "cache-a"},
    {Algorithm::kRendezvous, HashKeyKind::kPath, "", "/video/seg-0001.ts?bitrate=high", nullptr, nullptr, "", "cache-a"},
    {Algorithm::kRendezvous, HashKeyKind::kPath, "", "/img/logo.png", nullptr, nullptr, "", "cache-c"},
    {Algorithm::kRendezvous, HashKeyKind::kHeader, "x-tenant", "/", "X-Tenant", "acme", "", "cache-e"},
    {Algorithm::kRendezvous, HashKeyKind::kHeader, "x-tenant", "/", "x-tenant", "globex", "", "cache-e"},
    {Algorithm::kRendezvous, HashKeyKind::kCookie, "sid", "/", "Cookie", "a=1; sid=u-42; b=2", "", "cache-e"},
    {Algorithm::kRendezvous, HashKeyKind::kCookie, "sid", "/", "Cookie", "sid=\"u-77\"", "", "cache-d"},
    {Algorithm::kRendezvous, HashKeyKind::kQuery, "id", "/get?x=1&id=9931", nullptr, nullptr, "", "cache-d"},
    {Algorithm::kRendezvous, HashKeyKind::kQuery, "id", "/get?id=abc", nullptr, nullptr, "", "cache-d"},
    {Algorithm::kRendezvous, HashKeyKind::kSrc, "", "/", nullptr, nullptr, "10.1.2.3", "cache-e"},
    {Algorithm::kRendezvous, HashKeyKind::kSrc, "", "/", nullptr, nullptr, "192.168.7.20", "cache-d"},
    {Algorithm::kRendezvous, HashKeyKind::kSrc, "", "/", nullptr, nullptr, "2001:db8::5", "cache-d"},
    {Algorithm::kMaglev, HashKeyKind::kUri, "", "/obj/1", nullptr, nullptr, "", "cache-e"},
    {Algorithm::kMaglev, HashKeyKind::kUri, "", "/obj/8", nullptr, nullptr, "", "cache-b"},
    {Algorithm::kMaglev, HashKeyKind::kUri, "", "/obj/15", nullptr, nullptr, "", "cache-c"},
    {Algorithm::kMaglev, HashKeyKind::kUri, "", "/obj/22", nullptr, nullptr, "", "cache-e"},
    {Algorithm::kMaglev, HashKeyKind::kUri, "", "/obj/29", nullptr, nullptr, "", "cache-e"},
    {Algorithm::kMaglev, HashKeyKind::kUri, "", "/obj/36", nullptr, nullptr, "", "cache-c"},
    {Algorithm::kMaglev, HashKeyKind::kUri, "", "/obj/43", nullptr, nullptr, "", "cache-e"},
    {Algorithm::kMaglev, HashKeyKind::kUri, "", "/obj/50", nullptr, nullptr, "", "cache-c"},
    {Algorithm::kMaglev, HashKeyKind::kUri, "", "/video/seg-0001.ts?bitrate=high", nullptr, nullptr, "", "cache-c"},
    {Algorithm::kMaglev, HashKeyKind::kPath, "", "/video/seg-0001.ts?bitrate=high", nullptr, nullptr, "", "cache-c"},
    {Algorithm::kMaglev, HashKeyKind::kPath, "", "/img/logo.png", nullptr, nullptr, "", "cache-e"},
    {Algorithm::kMaglev, HashKeyKind::kHeader, "x-tenant", "/", "X-Tenant", "acme", "", "cache-c"},
    {Algorithm::kMaglev, HashKeyKind::kHeader, "x-tenant", "/", "x-tenant", "globex", "", "cache-d"},
    {Algorithm::kMaglev, HashKeyKind::kCookie, "sid", "/", "Cookie", "a=1; sid=u-42; b=2", "", "cache-c"},
    {Algorithm::kMaglev, HashKeyKind::kCookie, "sid", "/", "Cookie", "sid=\"u-77\"", "", "cache-d"},
    {Algorithm::kMaglev, HashKeyKind::kQuery, "id", "/get?x=1&id=9931", nullptr, nullptr, "", "cache-c"},
    {Algorithm::kMaglev, HashKeyKind::kQuery, "id", "/get?id=abc", nullptr, nullptr, "", "cache-b"},
    {Algorithm::kMaglev, HashKeyKind::kSrc, "", "/", nullptr, nullptr, "10.1.2.3", "cache-b"},
    {Algorithm::kMaglev, HashKeyKind::kSrc, "", "/", nullptr, nullptr, "192.168.7.20", "cache-a"},
    {Algorithm::kMaglev, HashKeyKind::kSrc, "", "/", nullptr, nullptr, "2001:db8::5", "cache-b"},
};

const std::vector<std::string> kIds = {"cache-a", "cache-b", "cache-c", "cache-d", "cache-e"};

PickRequest first_pick(const RouteKey& key, uint64_t now_ms = 0) {
  PickRequest rq;
  rq.key = key;
  rq.now_ms = now_ms;
  rq.worker = 0;
  return rq;
}

}  // namespace

TEST_CASE("pinned key -> backend table: every hash_key kind and algorithm routes as before") {
  for (const PinnedRoute& p : kPinned) {
    config::PoolConfig cfg = test::pool_config(kIds, {1, 1, 2, 1, 1});
    cfg.algorithm = p.algorithm;
    cfg.hash_key = {p.kind, p.name};
    test::PoolMaker maker;
    auto pool = maker.build(cfg);
    REQUIRE(pool != nullptr);
    test::Request req(p.target, p.header != nullptr ? p.header : "",
                      p.value != nullptr ? p.value : "");
    const RouteKey key = route_key(cfg, req.head, p.client_ip, 0);
    REQUIRE(key.kind == RouteKey::Kind::kKey);
    Router router;
    std::vector<uint64_t> scratch(pool->scratch_words());
    const RouteDecision d = router.route(*pool, first_pick(key), scratch);
    REQUIRE(d.backend != core::kNoBackend);
    INFO("target ", p.target, " value ", p.value != nullptr ? p.value : "-", " ip ", p.client_ip);
    CHECK(pool->backend(d.backend).id() == std::string(p.backend));
    CHECK(d.owner == d.backend);
    CHECK(d.reason == core::RouteReason::kHome);
  }
}

namespace {

// A pool whose key `/k` has a known owner; bound 100% without slack so that capacities are
// small and exact: with m in flight over 4 backends of weight 1, cap = ceil((m + 1) / 4).
struct Fixture {
  explicit Fixture(config::PoolConfig c = base_config()) : cfg(std::move(c)) {
    pool = maker.build(cfg);
    REQUIRE(pool != nullptr);
    scratch.assign(pool->scratch_words(), 0);
    key = RouteKey{RouteKey::Kind::kKey, core::hash64("/k"), "/k"};
    owner = core::BackendIndex(pool->selector().owner(key.hash));
  }
  static config::PoolConfig base_config() {
    config::PoolConfig c = test::pool_config({"a", "b", "c", "d"});
    c.balance_factor = 100;
    c.capacity_slack = 0;
    return c;
  }
  RouteDecision route(const RouteKey& k, core::PickKind kind = core::PickKind::kFirst) {
    PickRequest rq = first_pick(k);
    rq.kind = kind;
    return router.route(*pool, rq, scratch);
  }
  config::PoolConfig cfg;
  test::PoolMaker maker;
  std::unique_ptr<Pool> pool;
  Router router;
  std::vector<uint64_t> scratch;
  RouteKey key;
  core::BackendIndex owner = core::kNoBackend;
};

}  // namespace

TEST_CASE("max_connections_per_backend: a backend at its limit is passed over within one walk") {
  config::PoolConfig cfg = Fixture::base_config();
  cfg.max_connections_per_backend = 2;
  Fixture f(cfg);
  f.pool->backend(f.owner).open_connections.store(2);
  const RouteDecision d = f.route(f.key);
  REQUIRE(d.backend != core::kNoBackend);
  CHECK(d.backend != f.owner);
  CHECK(d.owner == f.owner);  // still the key's owner: this request is a spill
  CHECK(is_spill(d.owner, d.backend));
  CHECK(d.hops == 1);
  CHECK(d.skipped_excluded == 1);
  // The backend chosen is the next one of the key's preference order.
  std::vector<core::BackendIndex> order(f.pool->size());
  f.pool->selector().preference(f.key.hash, order);
  CHECK(d.backend == order[1]);
  // Below the limit the owner serves again; the exclusion was per pick, not remembered.
  f.pool->backend(f.owner).open_connections.store(1);
  CHECK(f.route(f.key).backend == f.owner);
  // With every backend at its limit there is no backend (503), counted once.
  for (size_t i = 0; i < f.pool->size(); ++i) {
    f.pool->backend(core::BackendIndex(i)).open_connections.store(2);
  }
  CHECK(f.route(f.key).backend == core::kNoBackend);
  CHECK(f.pool->state().no_backend.load() == 1);
}

TEST_CASE("missing_key: random spreads by a random hash and never fills the spill memory") {
  config::PoolConfig cfg = Fixture::base_config();
  cfg.hash_key = {HashKeyKind::kHeader, "x-user"};
  cfg.missing_key = config::MissingKeyPolicy::kRandom;
  cfg.spill_memory = 64;
  Fixture f(cfg);
  // Three backends full: every random hash owned by one of them spills.
  for (size_t i = 0; i < 3; ++i) test::set_in_flight(*f.pool, core::BackendIndex(i), 4);
  test::Request req("/");
  int walked_past_owner = 0;
  for (uint64_t i = 0; i < 200; ++i) {
    const RouteKey k = route_key(f.cfg, req.head, "10.0.0.1", core::mix64(i, 77));
    REQUIRE(k.kind == RouteKey::Kind::kRandom);
    const RouteDecision d = f.route(k);
    CHECK(d.backend == 3);          // the one backend with room
    CHECK(d.owner == core::kNoBackend);  // no key, no owner: never counted as a spill
    walked_past_owner += d.reason == core::RouteReason::kSpill ? 1 : 0;
  }
  CHECK(walked_past_owner > 100);
  const core::RoutePolicy* st = f.router.find(*f.pool);
  REQUIRE(st != nullptr);
  CHECK(st->memory().live() == 0);
  // A real key that spills is remembered.
  const RouteKey real{RouteKey::Kind::kKey, core::hash64("/x"), "/x"};
  if (f.pool->selector().owner(real.hash) != 3) {
    f.route(real);
    CHECK(st->memory().live() == 1);
  }
}

TEST_CASE("/api/route's last_backend names the backend that served, across a reload") {
  Fixture f;
  const RouteDecision d = f.route(f.key);
  REQUIRE(d.backend == f.owner);
  const std::string served = f.pool->backend(d.backend).id();
  LastDecision last = Router::last_decision(*f.pool, f.key.hash);
  REQUIRE(last.found);
  CHECK(last.reason == core::RouteReason::kHome);
  CHECK(f.pool->backend(last.backend).id() == served);
  // Reload: the same backends in another order plus one more; indices change meaning.
  std::vector<std::string> ids = {"b", "c", "d", "e", "a"};  // no id keeps its index
  auto reloaded = f.maker.build(test::pool_config(ids));
  REQUIRE(reloaded != nullptr);
  last = Router::last_decision(*reloaded, f.key.hash);
  REQUIRE(last.found);
  REQUIRE(last.backend != core::kNoBackend);
  CHECK(reloaded->backend(last.backend).id() == served);
  // A reload that removes the backend: the decision is still there, its backend is gone.
  std::vector<std::string> without;
  for (const auto& id : ids) {
    if (id != served) without.push_back(id);
  }
  auto removed = f.maker.build(test::pool_config(without));
  last = Router::last_decision(*removed, f.key.hash);
  CHECK(last.found);
  CHECK(last.backend == core::kNoBackend);
}

TEST_CASE("explain gives the data path's answer for a worker with no memory, and counts nothing") {
  Fixture f;
  for (uint32_t load : {0u, 1u, 3u, 6u}) {
    test::set_in_flight(*f.pool, f.owner, load);
    const uint64_t routed = f.pool->state().routed[0].load();
    const RouteDecision e = Router::explain(*f.pool, f.key.hash);
    CHECK(f.pool->state().routed[0].load() == routed);
    Router fresh;
    PickRequest rq = first_pick(f.key);
    const RouteDecision d = fresh.route(*f.pool, rq, f.scratch);
    CAPTURE(load);
    CHECK(e.backend == d.backend);
    CHECK(e.owner == d.owner);
    CHECK(e.reason == d.reason);
    CHECK(e.hops == d.hops);
  }
}

TEST_CASE("spill memory: a spilled key sticks to its successor, retries and old snapshots do not "
          "touch it, a reload forgets it") {
  Fixture f;
  // Owner full: cap = ceil((m + 1) / 4) with m = 3 in flight on it is 1.
  test::set_in_flight(*f.pool, f.owner, 3);
  const RouteDecision spill = f.route(f.key);
  REQUIRE(spill.reason == core::RouteReason::kSpill);
  const core::RoutePolicy* st = f.router.find(*f.pool);
  REQUIRE(st != nullptr);
  CHECK(st->memory().live() == 1);
  const RouteDecision again = f.route(f.key);
  CHECK(again.reason == core::RouteReason::kSticky);
  CHECK(again.backend == spill.backend);
  // A retry excluding the remembered backend does not rewrite the memory.
  std::vector<uint64_t> tried(f.pool->excluded_words(), 0);
  core::bit_set(tried, spill.backend);
  PickRequest retry = first_pick(f.key);
  retry.kind = core::PickKind::kRetry;
  retry.tried = tried;
  const RouteDecision r = f.router.route(*f.pool, retry, f.scratch);
  CHECK(r.backend != spill.backend);
  CHECK(f.route(f.key).backend == spill.backend);
  // A newer generation of the pool: spills are forgotten (indices may mean other backends), so
  // the owner, still full, makes a fresh spill decision instead of a sticky one.
  auto next = f.maker.build(f.cfg);
  REQUIRE(next != nullptr);
  PickRequest rq = first_pick(f.key);
  CHECK(f.router.route(*next, rq, f.scratch).reason == core::RouteReason::kSpill);
  CHECK(f.router.route(*next, rq, f.scratch).reason == core::RouteReason::kSticky);
  // A request still on the older snapshot is routed without the (newer) memory.
  CHECK(f.route(f.key).reason == core::RouteReason::kSpill);
}

TEST_CASE("count_served is the one spill count: pool total and the backend's spill_in") {
  Fixture f;
  const core::BackendIndex other = f.owner == 0 ? 1 : 0;
  Router::count_served(*f.pool, f.owner, f.owner);
  Router::count_served(*f.pool, other, core::kNoBackend);  // least loaded or random: no owner
  CHECK(f.pool->state().spilled.load() == 0);
  Router::count_served(*f.pool, other, f.owner);
  CHECK(f.pool->state().spilled.load() == 1);
  CHECK(f.pool->backend(other).counters.spill_in.load() == 1);
  CHECK(f.pool->backend(f.owner).counters.spill_in.load() == 0);
}

TEST_CASE("hot keys: the worker's replica table is published to the pool and used by explain") {
  config::PoolConfig cfg = Fixture::base_config();
  cfg.hot_keys.share = 10;
  cfg.hot_keys.window_ms = 1000;
  Fixture f(cfg);
  // One key in every other request, the rest each seen once (below min_count: never hot).
  std::vector<std::string> cold_keys;
  for (int i = 0; i < 200; ++i) cold_keys.push_back("/cold/" + std::to_string(i));
  for (uint64_t t = 0; t < 400; ++t) {
    const std::string& k = cold_keys[t / 2];
    PickRequest rq = first_pick(
        t % 2 == 0 ? f.key : RouteKey{RouteKey::Kind::kKey, core::hash64(k), k}, t);
    f.router.route(*f.pool, rq, f.scratch);
  }
  const uint64_t cold_hash = core::hash64(cold_keys[0]);
  std::vector<core::HotKeyReplicas> hot;
  {
    std::lock_guard<std::mutex> lock(f.pool->state().hot_mu);
    hot = f.pool->state().hot;
  }
  REQUIRE(hot.size() == 1);
  CHECK(hot[0].hash == f.key.hash);
  CHECK(hot[0].key == "/k");
  CHECK(hot[0].replicas > 1);
  CHECK(Router::explain(*f.pool, f.key.hash).replicas == hot[0].replicas);
  CHECK(Router::explain(*f.pool, cold_hash).replicas == 1);
}

}  // namespace rondel::proxy
