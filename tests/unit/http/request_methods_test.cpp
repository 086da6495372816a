// Request methods: every RFC 9110 token is parsed and kept as sent (llhttp 8.1 alone knows only
// its own list), with the same framing rules as any request and no idempotency unless listed.
#include <doctest/doctest.h>

#include <string>

#include "header_rules.h"
#include "parse_driver.h"
#include "rondel/http/writer.h"

using namespace rondel::http;
using rondel::http::test::parse_request;
using rondel::http::test::Parsed;

TEST_CASE("token methods llhttp does not know are parsed with the method intact") {
  for (const char* method : {"BAN", "QUERY", "get", "X-Custom_Method.v2", "!#$%&'*+-.^_`|~09aZ",
                             "PURGE", "PROPFIND", "PATCH"}) {
    INFO(method);
    const std::string wire = std::string(method) + " /obj?x=1 HTTP/1.1\r\nHost: a\r\n\r\n";
    Parsed p = parse_request(wire);
    REQUIRE(p.ended);
    CHECK(p.consumed == wire.size());
    CHECK(p.method == method);
    CHECK(p.target == "/obj?x=1");
    CHECK(p.framing == Framing::kNone);
    CHECK_FALSE(p.idempotent);
    CHECK_FALSE(p.is_head);
  }
}

TEST_CASE("a method split across feeds, at every byte, parses the same") {
  const std::string wire =
      "\r\nQUERY /search HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nq=abc";
  for (size_t cut = 1; cut < wire.size(); ++cut) {
    INFO(cut);
    Parsed p = parse_request(wire, Limits{}, {cut});
    REQUIRE(p.ended);
    CHECK(p.method == "QUERY");
    CHECK(p.target == "/search");
    CHECK(p.body == "q=abc");
  }
  Parsed bytewise = parse_request(wire, Limits{}, {1, 2, 3, 4, 5, 6, 7, 8});
  CHECK(bytewise.method == "QUERY");
}

TEST_CASE("an unknown method's body is framed by Content-Length or chunked, like any request") {
  Parsed chunked = parse_request(
      "BAN /obj HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n");
  REQUIRE(chunked.ended);
  CHECK(chunked.framing == Framing::kChunked);
  CHECK(chunked.body == "abc");
  // No framing field: no body; what follows is the next request (RFC 9112 6.3).
  RequestParser parser(Limits{});
  const std::string two = "BAN /a HTTP/1.1\r\nHost: a\r\n\r\nMKCOL /b HTTP/1.1\r\nHost: a\r\n\r\n";
  Parsed first = rondel::http::test::drive(parser, two);
  REQUIRE(first.ended);
  CHECK(first.method == "BAN");
  parser.reset();
  const std::string rest = two.substr(first.consumed);
  CHECK(rest.substr(0, 5) == "MKCOL");
  Parsed second = rondel::http::test::drive(parser, rest);
  REQUIRE(second.ended);
  CHECK(second.method == "MKCOL");
  CHECK(second.target == "/b");
}

TEST_CASE("idempotent: exactly the RFC 9110 9.2.2 methods, case-sensitive") {
  for (const char* method : {"GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE"}) {
    INFO(method);
    CHECK(parse_request(std::string(method) + " / HTTP/1.1\r\nHost: a\r\n\r\n").idempotent);
  }
  for (const char* method : {"POST", "PATCH", "BAN", "QUERY", "get", "GETS", "PURGE"}) {
    INFO(method);
    Parsed p = parse_request(std::string(method) + " / HTTP/1.1\r\nHost: a\r\n\r\n");
    REQUIRE(p.ended);
    CHECK_FALSE(p.idempotent);
  }
  CHECK(parse_request("HEAD / HTTP/1.1\r\nHost: a\r\n\r\n").is_head);
  CHECK_FALSE(parse_request("head / HTTP/1.1\r\nHost: a\r\n\r\n").is_head);
}

TEST_CASE("CONNECT stays refused, whole or split; a method past the line limit is 414") {
  const std::string wire = "CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n";
  for (size_t cut = 0; cut < 10; ++cut) {
    Parsed p = parse_request(wire, Limits{}, {cut});
    CHECK(p.failed);
    CHECK(p.status == 501);
  }
  Limits limits;
  limits.max_request_line = 64;
  Parsed p = parse_request(std::string(100, 'B') + " / HTTP/1.1\r\nHost: a\r\n\r\n", limits);
  CHECK(p.failed);
  CHECK(p.status == 414);
}

TEST_CASE("a request with an unknown method is forwarded with that method") {
  RequestParser parser(Limits{});
  const std::string wire = "BAN /obj/1 HTTP/1.1\r\nHost: cache\r\nX-Ban: all\r\n\r\n";
  REQUIRE(parser.feed(wire.data(), wire.size()).event == Event::kHead);
  std::string out;
  ForwardRequest fwd{"10.0.0.1"};
  write_request_head(parser.head(), fwd, out);
  CHECK(out ==
        "BAN /obj/1 HTTP/1.1\r\nHost: cache\r\nX-Ban: all\r\nX-Forwarded-For: 10.0.0.1\r\n"
        "X-Forwarded-Proto: http\r\n\r\n");
}

TEST_CASE("userinfo: only an '@' in the authority of an absolute-form target") {
  CHECK(rules::target_has_userinfo("http://user@host/"));
  CHECK(rules::target_has_userinfo("https://u:p@h:1/a?b"));
  CHECK(rules::target_has_userinfo("http://@h"));
  CHECK_FALSE(rules::target_has_userinfo("/a@b"));
  CHECK_FALSE(rules::target_has_userinfo("http://host/a@b"));
  CHECK_FALSE(rules::target_has_userinfo("http://host?a=@b"));
  CHECK_FALSE(rules::target_has_userinfo("*"));
  CHECK_FALSE(rules::target_has_userinfo("http:/x@y"));
  for (const char* target : {"/a@b", "http://host/a@b", "http://host:80/p?q=@"}) {
    INFO(target);
    CHECK(parse_request(std::string("GET ") + target + " HTTP/1.1\r\nHost: host\r\n\r\n").ended);
  }
}

// The fuzz targets require one verdict whatever the split points: a method is judged by its
// bytes up to the first one that is not a token character, not by what follows in the same read.
TEST_CASE("a bad method gets the same verdict wherever the input is split") {
  for (const std::string& wire :
       {std::string("G(T\n / HTTP/1.1\r\n\r\n"), std::string("GET\r\n\r\n"),
        std::string("B@N /a HTTP/1.1\r\nHost: a\r\n\r\n"),
        std::string("\r\nG\x01T / HTTP/1.1\r\n\r\n")}) {
    INFO(wire);
    Parsed whole = parse_request(wire);
    REQUIRE(whole.failed);
    for (size_t cut = 1; cut < wire.size(); ++cut) {
      Parsed p = parse_request(wire, Limits{}, {cut});
      CHECK(p.failed);
      CHECK(p.status == whole.status);
      CHECK(p.reason == whole.reason);
    }
  }
  CHECK(parse_request("G(T\n / HTTP/1.1\r\n\r\n").reason == "bad_method");
}
