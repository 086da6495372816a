// Router: the hash policy, route state and pick as the data path and /api/route run them.
#include <doctest/doctest.h>

#include <string>
#include <vector>

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
    {Algorithm::kMaglev, HashKeyKind::kUri, "", "/obj/1", nullptr, nullptr, "", "cache-d"},
    {Algorithm::kMaglev, HashKeyKind::kUri, "", "/obj/8", nullptr, nullptr, "", "cache-a"},
    {Algorithm::kMaglev, HashKeyKind::kUri, "", "/obj/15", nullptr, nullptr, "", "cache-d"},
    {Algorithm::kMaglev, HashKeyKind::kUri, "", "/obj/22", nullptr, nullptr, "", "cache-b"},
    {Algorithm::kMaglev, HashKeyKind::kUri, "", "/obj/29", nullptr, nullptr, "", "cache-e"},
    {Algorithm::kMaglev, HashKeyKind::kUri, "", "/obj/36", nullptr, nullptr, "", "cache-d"},
    {Algorithm::kMaglev, HashKeyKind::kUri, "", "/obj/43", nullptr, nullptr, "", "cache-c"},
    {Algorithm::kMaglev, HashKeyKind::kUri, "", "/obj/50", nullptr, nullptr, "", "cache-d"},
    {Algorithm::kMaglev, HashKeyKind::kUri, "", "/video/seg-0001.ts?bitrate=high", nullptr, nullptr, "", "cache-a"},
    {Algorithm::kMaglev, HashKeyKind::kPath, "", "/video/seg-0001.ts?bitrate=high", nullptr, nullptr, "", "cache-a"},
    {Algorithm::kMaglev, HashKeyKind::kPath, "", "/img/logo.png", nullptr, nullptr, "", "cache-c"},
    {Algorithm::kMaglev, HashKeyKind::kHeader, "x-tenant", "/", "X-Tenant", "acme", "", "cache-e"},
    {Algorithm::kMaglev, HashKeyKind::kHeader, "x-tenant", "/", "x-tenant", "globex", "", "cache-e"},
    {Algorithm::kMaglev, HashKeyKind::kCookie, "sid", "/", "Cookie", "a=1; sid=u-42; b=2", "", "cache-e"},
    {Algorithm::kMaglev, HashKeyKind::kCookie, "sid", "/", "Cookie", "sid=\"u-77\"", "", "cache-d"},
    {Algorithm::kMaglev, HashKeyKind::kQuery, "id", "/get?x=1&id=9931", nullptr, nullptr, "", "cache-d"},
    {Algorithm::kMaglev, HashKeyKind::kQuery, "id", "/get?id=abc", nullptr, nullptr, "", "cache-d"},
    {Algorithm::kMaglev, HashKeyKind::kSrc, "", "/", nullptr, nullptr, "10.1.2.3", "cache-e"},
    {Algorithm::kMaglev, HashKeyKind::kSrc, "", "/", nullptr, nullptr, "192.168.7.20", "cache-d"},
    {Algorithm::kMaglev, HashKeyKind::kSrc, "", "/", nullptr, nullptr, "2001:db8::5", "cache-d"},
    {Algorithm::kRendezvous, HashKeyKind::kUri, "", "/obj/1", nullptr, nullptr, "", "cache-e"},
    {Algorithm::kRendezvous, HashKeyKind::kUri, "", "/obj/8", nullptr, nullptr, "", "cache-b"},
    {Algorithm::kRendezvous, HashKeyKind::kUri, "", "/obj/15", nullptr, nullptr, "", "cache-c"},
    {Algorithm::kRendezvous, HashKeyKind::kUri, "", "/obj/22", nullptr, nullptr, "", "cache-e"},
    {Algorithm::kRendezvous, HashKeyKind::kUri, "", "/obj/29", nullptr, nullptr, "", "cache-e"},
    {Algorithm::kRendezvous, HashKeyKind::kUri, "", "/obj/36", nullptr, nullptr, "", "cache-c"},
    {Algorithm::kRendezvous, HashKeyKind::kUri, "", "/obj/43", nullptr, nullptr, "", "cache-e"},
    {Algorithm::kRendezvous, HashKeyKind::kUri, "", "/obj/50", nullptr, nullptr, "", "cache-c"},
    {Algorithm::kRendezvous, HashKeyKind::kUri, "", "/video/seg-0001.ts?bitrate=high", nullptr, nullptr, "", "cache-c"},
    {Algorithm::kRendezvous, HashKeyKind::kPath, "", "/video/seg-0001.ts?bitrate=high", nullptr, nullptr, "", "cache-c"},
    {Algorithm::kRendezvous, HashKeyKind::kPath, "", "/img/logo.png", nullptr, nullptr, "", "cache-e"},
    {Algorithm::kRendezvous, HashKeyKind::kHeader, "x-tenant", "/", "X-Tenant", "acme", "", "cache-c"},
    {Algorithm::kRendezvous, HashKeyKind::kHeader, "x-tenant", "/", "x-tenant", "globex", "", "cache-d"},
    {Algorithm::kRendezvous, HashKeyKind::kCookie, "sid", "/", "Cookie", "a=1; sid=u-42; b=2", "", "cache-c"},
    {Algorithm::kRendezvous, HashKeyKind::kCookie, "sid", "/", "Cookie", "sid=\"u-77\"", "", "cache-d"},
    {Algorithm::kRendezvous, HashKeyKind::kQuery, "id", "/get?x=1&id=9931", nullptr, nullptr, "", "cache-c"},
    {Algorithm::kRendezvous, HashKeyKind::kQuery, "id", "/get?id=abc", nullptr, nullptr, "", "cache-b"},
    {Algorithm::kRendezvous, HashKeyKind::kSrc, "", "/", nullptr, nullptr, "10.1.2.3", "cache-b"},
    {Algorithm::kRendezvous, HashKeyKind::kSrc, "", "/", nullptr, nullptr, "192.168.7.20", "cache-a"},
    {Algorithm::kRendezvous, HashKeyKind::kSrc, "", "/", nullptr, nullptr, "2001:db8::5", "cache-b"},
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
    CAPTURE(p.target);
    CAPTURE(p.value);
    CAPTURE(p.client_ip);
    CHECK(pool->backend(d.backend).id() == p.backend);
    CHECK(d.owner == d.backend);
    CHECK(d.reason == core::RouteReason::kHome);
  }
}
