// RequestParser mechanics: heads, bodies, pipelining, split feeds, limits, keep-alive.
#include <doctest/doctest.h>

#include <random>
#include <set>
#include <string>

#include "parse_driver.h"

using namespace rondel::http;
using rondel::http::test::parse_request;
using rondel::http::test::Parsed;

TEST_CASE("a simple GET yields its head and ends at the last byte") {
  std::string wire =
      "GET /a/b?c=d HTTP/1.1\r\nHost:  example.com \r\nUser-Agent: t\r\nAccept: */*\r\n\r\n";
  Parsed p = parse_request(wire);
  REQUIRE(p.ended);
  CHECK(p.consumed == wire.size());
  CHECK(p.method == "GET");
  CHECK(p.target == "/a/b?c=d");
  CHECK(p.host == "example.com");
  REQUIRE(p.headers.size() == 3);
  CHECK(p.headers[0] == std::pair<std::string, std::string>{"Host", "example.com"});
  CHECK(p.headers[2] == std::pair<std::string, std::string>{"Accept", "*/*"});
  CHECK(p.framing == Framing::kNone);
  CHECK(p.keep_alive);
  CHECK(p.idempotent);
  CHECK_FALSE(p.is_head);
  CHECK(p.body.empty());
}

TEST_CASE("method flags: HEAD, POST, Expect: 100-continue") {
  Parsed head = parse_request("HEAD / HTTP/1.1\r\nHost: a\r\n\r\n");
  CHECK(head.is_head);
  CHECK(head.idempotent);
  Parsed post = parse_request(
      "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nExpect: 100-Continue\r\n\r\nhi");
  REQUIRE(post.ended);
  CHECK_FALSE(post.idempotent);
  CHECK(post.expect_continue);
  CHECK(post.framing == Framing::kLength);
  CHECK(post.content_length == 2);
  CHECK(post.body == "hi");
}

TEST_CASE("keep-alive follows the version and Connection") {
  CHECK(parse_request("GET / HTTP/1.1\r\nHost: a\r\n\r\n").keep_alive);
  CHECK_FALSE(parse_request("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n").keep_alive);
  CHECK_FALSE(parse_request("GET / HTTP/1.0\r\n\r\n").keep_alive);
  Parsed ka = parse_request("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
  REQUIRE(ka.ended);
  CHECK(ka.keep_alive);
  CHECK(ka.version_minor == 0);
  CHECK(ka.host.empty());  // HTTP/1.0 may omit Host
}

TEST_CASE("Content-Length: 0 is a length-framed empty body") {
  Parsed p = parse_request("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n");
  REQUIRE(p.ended);
  CHECK(p.framing == Framing::kLength);
  CHECK(p.content_length == 0);
  CHECK(p.body_events == 0);
}

TEST_CASE("chunked body is de-chunked; extensions and trailers are dropped") {
  std::string wire =
      "POST /u HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\n\r\n"
      "5;flag;name=value\r\nhello\r\n"
      "1\r\n \r\n"
      "A;q=\"quoted\"\r\n0123456789\r\n"
      "0;last\r\nX-Trailer: t\r\n\r\n";
  Parsed p = parse_request(wire);
  REQUIRE(p.ended);
  CHECK(p.consumed == wire.size());
  CHECK(p.framing == Framing::kChunked);
  CHECK(p.body == "hello 0123456789");
  CHECK(p.headers.size() == 2);  // the trailer is not a header
}

TEST_CASE("pipelined requests: kMessageEnd's consumed points exactly at the next request") {
  std::string first = "POST /1 HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc";
  std::string second = "GET /2 HTTP/1.1\r\nHost: b\r\n\r\n";
  std::string third = "POST /3 HTTP/1.1\r\nHost: c\r\nTransfer-Encoding: chunked\r\n\r\n"
                      "2\r\nxy\r\n0\r\n\r\n";
  std::string wire = first + second + third;
  RequestParser parser(Limits{});
  Parsed a = rondel::http::test::drive(parser, wire);
  REQUIRE(a.ended);
  CHECK(a.consumed == first.size());
  CHECK(a.body == "abc");
  parser.reset();
  std::string_view rest = std::string_view(wire).substr(a.consumed);
  Parsed b = rondel::http::test::drive(parser, rest);
  REQUIRE(b.ended);
  CHECK(b.consumed == second.size());
  CHECK(b.target == "/2");
  CHECK(b.host == "b");
  parser.reset();
  Parsed c = rondel::http::test::drive(parser, rest.substr(b.consumed));
  REQUIRE(c.ended);
  CHECK(c.consumed == third.size());
  CHECK(c.body == "xy");
}

TEST_CASE("a bodiless request ends on a zero-byte feed after kHead") {
  RequestParser parser(Limits{});
  std::string wire = "GET / HTTP/1.1\r\nHost: a\r\n\r\n";
  Step s = parser.feed(wire.data(), wire.size());
  REQUIRE(s.event == Event::kHead);
  CHECK(s.consumed == wire.size());
  CHECK(parser.head().target == "/");
  s = parser.feed(nullptr, 0);
  CHECK(s.event == Event::kMessageEnd);
  CHECK(s.consumed == 0);
}

TEST_CASE("a length body ends on a zero-byte feed after its last kBody") {
  RequestParser parser(Limits{});
  std::string wire = "PUT / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n\r\nbody";
  Step s = parser.feed(wire.data(), wire.size());
  REQUIRE(s.event == Event::kHead);
  size_t off = s.consumed;
  s = parser.feed(wire.data() + off, wire.size() - off);
  REQUIRE(s.event == Event::kBody);
  CHECK(s.body == "body");
  CHECK(s.body.data() == wire.data() + off);  // a view into the fed bytes, not a copy
  off += s.consumed;
  CHECK(off == wire.size());
  s = parser.feed(wire.data() + off, 0);
  CHECK(s.event == Event::kMessageEnd);
}

TEST_CASE("head views stay valid until reset, and storage is reused across messages") {
  RequestParser parser(Limits{});
  std::string wire = "GET /first HTTP/1.1\r\nHost: a\r\nX-Long: " + std::string(500, 'v') +
                     "\r\n\r\n";
  Parsed a = rondel::http::test::drive(parser, wire);
  REQUIRE(a.ended);
  CHECK(parser.head().target == "/first");
  CHECK(parser.head().headers[1].value.size() == 500);
  parser.reset();
  Parsed b = rondel::http::test::drive(parser, "GET /second HTTP/1.1\r\nHost: z\r\n\r\n");
  REQUIRE(b.ended);
  CHECK(parser.head().target == "/second");
  CHECK(parser.head().host == "z");
}

TEST_CASE("head_bytes_pending tells an idle connection from a slow head") {
  RequestParser parser(Limits{});
  CHECK(parser.head_bytes_pending() == 0);
  std::string part = "GET / HTTP/1.1\r\nHo";
  Step s = parser.feed(part.data(), part.size());
  CHECK(s.event == Event::kNeedMore);
  CHECK(s.consumed == part.size());
  CHECK(parser.head_bytes_pending() == part.size());
  std::string rest = "st: a\r\n\r\n";
  s = parser.feed(rest.data(), rest.size());
  CHECK(s.event == Event::kHead);
  parser.feed(nullptr, 0);
  parser.reset();
  CHECK(parser.head_bytes_pending() == 0);
}

TEST_CASE("property: any split of the input gives the same head and body as one feed") {
  const std::vector<std::string> wires = {
      "POST /p?q=1 HTTP/1.1\r\nHost: h.example:8080\r\nX-A: one two\r\nContent-Length: 11\r\n"
      "Connection: keep-alive\r\n\r\nhello world",
      "POST /c HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nX-B: \tb\t\r\n\r\n"
      "3;ext=1\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\nT: 1\r\n\r\n",
      "GET /only-head HTTP/1.0\r\nUser-Agent: x\r\n\r\n",
  };
  std::mt19937 rng(20240611);
  for (const std::string& wire : wires) {
    Parsed whole = parse_request(wire);
    REQUIRE(whole.ended);
    // Byte at a time.
    std::vector<size_t> every;
    for (size_t i = 1; i < wire.size(); ++i) every.push_back(i);
    Parsed bytewise = parse_request(wire, Limits{}, every);
    CHECK(bytewise.ended);
    CHECK(bytewise.headers == whole.headers);
    CHECK(bytewise.target == whole.target);
    CHECK(bytewise.method == whole.method);
    CHECK(bytewise.body == whole.body);
    // Random split points.
    for (int round = 0; round < 300; ++round) {
      std::set<size_t> cut_set;
      size_t n = rng() % 6 + 1;
      for (size_t i = 0; i < n; ++i) cut_set.insert(rng() % wire.size());
      std::vector<size_t> cuts(cut_set.begin(), cut_set.end());
      Parsed split = parse_request(wire, Limits{}, cuts);
      INFO("wire #" << (&wire - wires.data()) << " round " << round);
      REQUIRE(split.ended);
      CHECK(split.consumed == wire.size());
      CHECK(split.headers == whole.headers);
      CHECK(split.target == whole.target);
      CHECK(split.host == whole.host);
      CHECK(split.body == whole.body);
      CHECK(split.framing == whole.framing);
      CHECK(split.keep_alive == whole.keep_alive);
    }
  }
}

TEST_CASE("limits: request line 414, head bytes 431, field count 431") {
  Limits lim;
  lim.max_request_line = 64;
  lim.max_header_bytes = 256;
  lim.max_headers = 5;
  std::string ok_line = "GET /" + std::string(64 - 15, 'a') + " HTTP/1.1\r\nHost: a\r\n\r\n";
  CHECK(parse_request(ok_line, lim).ended);
  Parsed long_line =
      parse_request("GET /" + std::string(60, 'a') + " HTTP/1.1\r\nHost: a\r\n\r\n", lim);
  CHECK(long_line.failed);
  CHECK(long_line.status == 414);
  CHECK(long_line.reason == "uri_too_long");

  Parsed big = parse_request(
      "GET / HTTP/1.1\r\nHost: a\r\nX: " + std::string(300, 'x') + "\r\n\r\n", lim);
  CHECK(big.status == 431);
  CHECK(big.reason == "header_too_large");
  // The limit is hit before the head is complete: a client dribbling an endless head is cut off.
  RequestParser slow(lim);
  std::string endless = "GET / HTTP/1.1\r\nHost: a\r\n";
  Step s{};
  for (int i = 0; i < 100 && s.event != Event::kError; ++i) {
    s = slow.feed(endless.data(), endless.size());
    endless = "X-Pad: 0123456789\r\n";
  }
  CHECK(s.event == Event::kError);
  CHECK(slow.error().status == 431);

  std::string many = "GET / HTTP/1.1\r\nHost: a\r\n";
  for (int i = 0; i < 5; ++i) many += "X" + std::to_string(i) + ": v\r\n";
  Parsed too_many = parse_request(many + "\r\n", lim);
  CHECK(too_many.status == 431);
  CHECK(too_many.reason == "too_many_headers");
}

TEST_CASE("limits: body 413 from Content-Length at head time and from chunks as they arrive") {
  Limits lim;
  lim.max_body_bytes = 10;
  Parsed fits = parse_request("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\n0123456789",
                              lim);
  CHECK(fits.ended);
  Parsed cl = parse_request("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 11\r\n\r\n", lim);
  CHECK_FALSE(cl.head_seen);
  CHECK(cl.status == 413);
  CHECK(cl.reason == "body_too_large");
  Parsed chunked = parse_request(
      "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
      "6\r\nabcdef\r\n5\r\nghijk\r\n0\r\n\r\n",
      lim);
  CHECK(chunked.head_seen);
  CHECK(chunked.body == "abcdef");  // the first chunk fits and was forwarded
  CHECK(chunked.status == 413);
  CHECK(chunked.reason == "body_too_large");
  Parsed huge_chunk = parse_request(
      "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nffffffff\r\n", lim);
  CHECK(huge_chunk.status == 413);
}

TEST_CASE("after kError nothing more is parsed") {
  RequestParser parser(Limits{});
  std::string bad = "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n";
  Step s = parser.feed(bad.data(), bad.size());
  REQUIRE(s.event == Event::kError);
  std::string good = "GET / HTTP/1.1\r\nHost: a\r\n\r\n";
  CHECK(parser.feed(good.data(), good.size()).event == Event::kError);
  CHECK(parser.error().reason == "duplicate_host");
}

TEST_CASE("property: mutated requests never overrun the input and end in a definite state") {
  const std::string base =
      "POST /p HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nX: y\r\n\r\n"
      "3;e=1\r\nabc\r\n0\r\nT: 1\r\n\r\n"
      "GET /2 HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nok";
  const char alphabet[] = {'\r', '\n', ' ', '\t', ':', ';', '0', 'a', 'F', '\0', '#', ','};
  std::mt19937 rng(7);
  for (int round = 0; round < 3000; ++round) {
    std::string wire = base;
    int edits = static_cast<int>(rng() % 4) + 1;
    for (int e = 0; e < edits; ++e) {
      size_t at = rng() % wire.size();
      char c = alphabet[rng() % sizeof(alphabet)];
      switch (rng() % 3) {
        case 0: wire[at] = c; break;
        case 1: wire.insert(wire.begin() + static_cast<long>(at), c); break;
        default: wire.erase(at, 1); break;
      }
    }
    RequestParser parser(Limits{});
    size_t off = 0;
    for (int steps = 0; steps < 10000; ++steps) {
      Step s = parser.feed(wire.data() + off, wire.size() - off);
      REQUIRE(s.consumed <= wire.size() - off);
      off += s.consumed;
      if (s.event == Event::kError) {
        CHECK(parser.error().status >= 400);
        CHECK_FALSE(parser.error().reason.empty());
        break;
      }
      if (s.event == Event::kNeedMore) break;
      if (s.event == Event::kMessageEnd) parser.reset();
    }
  }
}
