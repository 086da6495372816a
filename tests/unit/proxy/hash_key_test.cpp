// Hash-key extraction: the key of a request does not depend on incidental form (defect 8 of
// issue 13): IPv4-mapped sources, absolute-form targets, empty values.
#include "rondel/proxy/hash_key.h"

#include <doctest/doctest.h>

#include <string>

#include "rondel/core/hash.h"
#include "rondel/proxy/router.h"
#include "router_fixture.h"

namespace rondel::proxy {
namespace {

using config::HashKeyKind;

// The key of `req` under `kind`, or "<missing>".
std::string key_of(HashKeyKind kind, const std::string& name, const test::Request& req,
                   std::string_view ip = "192.0.2.7") {
  std::string_view out;
  if (!extract_key(config::HashKey{kind, name}, req.head, ip, out)) return "<missing>";
  return std::string(out);
}

}  // namespace

TEST_CASE("src: an IPv4 client has one key on IPv4 and on dual-stack listeners") {
  test::Request req("/");
  CHECK(key_of(HashKeyKind::kSrc, "", req, "::ffff:192.0.2.7") == "192.0.2.7");
  CHECK(key_of(HashKeyKind::kSrc, "", req, "::FFFF:10.1.2.3") == "10.1.2.3");
  CHECK(key_of(HashKeyKind::kSrc, "", req, "192.0.2.7") == "192.0.2.7");
  // Real IPv6 addresses stay as they are (including ones that merely start like a mapped one).
  CHECK(key_of(HashKeyKind::kSrc, "", req, "2001:db8::5") == "2001:db8::5");
  CHECK(key_of(HashKeyKind::kSrc, "", req, "::ffff:0:1") == "::ffff:0:1");
  CHECK(key_of(HashKeyKind::kSrc, "", req, "") == "<missing>");
}

TEST_CASE("absolute-form and origin-form targets for one resource give one key") {
  struct Case {
    const char* absolute;
    const char* origin;
  };
  const Case cases[] = {
      {"http://cache.example/obj/1?v=2", "/obj/1?v=2"},
      {"HTTP://cache.example:8080/obj/1", "/obj/1"},
      {"https://user-agent.example/a/b/c?x=1&id=9", "/a/b/c?x=1&id=9"},
      {"http://cache.example", "/"},
  };
  for (const Case& c : cases) {
    test::Request abs(c.absolute), org(c.origin);
    INFO(c.absolute);
    CHECK(key_of(HashKeyKind::kUri, "", abs) == key_of(HashKeyKind::kUri, "", org));
    CHECK(key_of(HashKeyKind::kPath, "", abs) == key_of(HashKeyKind::kPath, "", org));
    CHECK(key_of(HashKeyKind::kQuery, "id", abs) == key_of(HashKeyKind::kQuery, "id", org));
  }
  test::Request no_path("http://cache.example?v=2");
  CHECK(key_of(HashKeyKind::kPath, "", no_path) == "/");
  test::Request abs("http://cache.example/obj/1?v=2");
  CHECK(key_of(HashKeyKind::kUri, "", abs) == "/obj/1?v=2");
  CHECK(key_of(HashKeyKind::kPath, "", abs) == "/obj/1");
  // missing_key: hash_uri falls back to the same origin-form key.
  config::PoolConfig cfg = test::pool_config({"a"});
  cfg.hash_key = {HashKeyKind::kHeader, "x-user"};
  cfg.missing_key = config::MissingKeyPolicy::kHashUri;
  test::Request org("/obj/1?v=2");
  CHECK(route_key(cfg, abs.head, "", 0).hash == route_key(cfg, org.head, "", 0).hash);
  CHECK(route_key(cfg, abs.head, "", 0).key == "/obj/1?v=2");
}

TEST_CASE("an empty header, cookie or query value counts as missing") {
  test::Request empty_header("/", "X-User", "");
  CHECK(key_of(HashKeyKind::kHeader, "x-user", empty_header) == "<missing>");
  test::Request header("/", "X-User", "u1");
  CHECK(key_of(HashKeyKind::kHeader, "x-user", header) == "u1");

  test::Request empty_cookie("/", "Cookie", "a=1; sid=; b=2");
  CHECK(key_of(HashKeyKind::kCookie, "sid", empty_cookie) == "<missing>");
  test::Request quoted_empty("/", "Cookie", "sid=\"\"");
  CHECK(key_of(HashKeyKind::kCookie, "sid", quoted_empty) == "<missing>");
  test::Request cookie("/", "Cookie", "a=1; sid=u-42");
  CHECK(key_of(HashKeyKind::kCookie, "sid", cookie) == "u-42");

  for (const char* t : {"/get?id=", "/get?id", "/get?x=1&id=&y=2"}) {
    test::Request q(t);
    INFO(t);
    CHECK(key_of(HashKeyKind::kQuery, "id", q) == "<missing>");
  }
  test::Request q("/get?x=1&id=9931");
  CHECK(key_of(HashKeyKind::kQuery, "id", q) == "9931");

  // So missing_key applies: here reject.
  config::PoolConfig cfg = test::pool_config({"a"});
  cfg.hash_key = {HashKeyKind::kHeader, "x-user"};
  cfg.missing_key = config::MissingKeyPolicy::kReject;
  CHECK(route_key(cfg, empty_header.head, "", 0).kind == RouteKey::Kind::kReject);
  CHECK(route_key(cfg, header.head, "", 0).kind == RouteKey::Kind::kKey);
}

TEST_CASE("find_cookie and find_query_param") {
  std::string_view out;
  CHECK(find_cookie("a=1; b = 2 ;c=3", "b", out));
  CHECK(out == "2");
  CHECK_FALSE(find_cookie("ab=1", "a", out));
  CHECK(find_query_param("/p?a=1&b=2", "b", out));
  CHECK(out == "2");
  CHECK_FALSE(find_query_param("/p?ab=1", "a", out));
  CHECK_FALSE(find_query_param("/p", "a", out));
}

}  // namespace rondel::proxy

// ---- range-chunk keys (pool range_chunk) -------------------------------------------------------

namespace rondel::proxy {

TEST_CASE("range_chunk_index: one byte range gives floor(first / size); anything else none") {
  constexpr uint64_t kMiB = 1 << 20;
  struct Case {
    const char* value;
    bool single;
    uint64_t chunk;
  };
  const Case cases[] = {
      {"bytes=0-1048575", true, 0},
      {"bytes=4194303-4194304", true, 0},  // crosses a boundary: the chunk of its first byte
      {"bytes=4194304-5242879", true, 1},
      {"BYTES = 12582912-", true, 3},
      {" bytes=8388608-8388608 ", true, 2},
      {"bytes=-500", false, 0},  // suffix: offset unknown without the object's size
      {"bytes=0-1,5-6", false, 0},
      {"items=0-10", false, 0},
      {"bytes=9-3", false, 0},
      {"bytes=x-3", false, 0},
      {"bytes=3", false, 0},
      {"bytes=99999999999999999999-", false, 0},  // overflows uint64
      {"", false, 0},
  };
  for (const Case& c : cases) {
    INFO(c.value);
    uint64_t chunk = 77;
    CHECK(range_chunk_index(c.value, 4 * kMiB, chunk) == c.single);
    if (c.single) CHECK(chunk == c.chunk);
  }
  uint64_t chunk = 0;
  CHECK_FALSE(range_chunk_index("bytes=0-1", 0, chunk));  // no chunk size: never a chunk
}

TEST_CASE(
    "route_key with range_chunk: one hash per chunk of an object, the same for every "
    "request of that chunk; no single Range hashes as without range_chunk") {
  config::PoolConfig cfg = test::pool_config({"a", "b", "c", "d"});
  cfg.hash_key.kind = config::HashKeyKind::kPath;
  cfg.range_chunk = 4 << 20;
  const uint64_t whole = core::hash64("/obj/7");
  auto hash_of = [&](const char* range) {
    test::Request req("/obj/7?v=1", range ? "Range" : "", range ? range : "");
    return route_key(cfg, req.head, "192.0.2.1", 0).hash;
  };
  CHECK(hash_of(nullptr) == whole);
  CHECK(hash_of("bytes=-100") == whole);
  CHECK(hash_of("bytes=0-1,9-10") == whole);
  CHECK(hash_of("bytes=0-1048575") == chunk_hash(whole, 0));
  CHECK(hash_of("bytes=0-1048575") == hash_of("bytes=3145728-4194303"));  // both in chunk 0
  CHECK(hash_of("bytes=4194304-") == chunk_hash(whole, 1));
  CHECK(hash_of("bytes=4194304-") != hash_of("bytes=0-"));
  CHECK(chunk_hash(whole, 0) != whole);
  // Two Range fields are not one single range.
  http::Header two[2] = {{"Range", "bytes=0-1"}, {"range", "bytes=4194304-4194305"}};
  test::Request req("/obj/7");
  req.head.headers = std::span<const http::Header>(two, 2);
  CHECK(route_key(cfg, req.head, "192.0.2.1", 0).hash == whole);
  // Without range_chunk a Range changes nothing.
  cfg.range_chunk = 0;
  CHECK(hash_of("bytes=4194304-") == whole);
}

TEST_CASE("range_chunk: the chunks of one object spread over the pool's backends") {
  config::PoolConfig cfg = test::pool_config({"a", "b", "c", "d"});
  cfg.range_chunk = 1 << 20;
  test::PoolMaker maker;
  auto pool = maker.build(cfg);
  REQUIRE(pool);
  std::vector<int> per_backend(4);
  const uint64_t whole = core::hash64("/big");
  for (uint64_t chunk = 0; chunk < 256; ++chunk) {
    ++per_backend[pool->selector().owner(chunk_hash(whole, chunk))];
  }
  // 256 chunks over 4 equal backends: each gets 64 on average (sd ~7); fewer than 32 has
  // probability < 1e-5 per backend.
  for (int n : per_backend) CHECK(n >= 32);
}

}  // namespace rondel::proxy
