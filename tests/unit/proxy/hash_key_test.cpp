// Hash-key extraction: the key of a request does not depend on incidental form (defect 8 of
// issue 13): IPv4-mapped sources, absolute-form targets, empty values.
#include <doctest/doctest.h>

#include <string>

#include "rondel/proxy/hash_key.h"
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
