// ResponseParser: framing, bodiless statuses, 1xx, truncation, conflicting framing.
#include <doctest/doctest.h>

#include <random>
#include <set>
#include <string>

#include "parse_driver.h"

using namespace rondel::http;
using rondel::http::test::drive;
using rondel::http::test::Parsed;

namespace {

Parsed parse_response(std::string_view wire, bool request_was_head = false) {
  ResponseParser parser(Limits{});
  parser.begin(request_was_head);
  return drive(parser, wire);
}

}  // namespace

TEST_CASE("Content-Length response") {
  std::string wire = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Cache: hit\r\n\r\nhello";
  Parsed p = parse_response(wire);
  REQUIRE(p.ended);
  CHECK(p.consumed == wire.size());
  CHECK(p.resp_status == 200);
  CHECK(p.resp_reason == "OK");
  CHECK(p.framing == Framing::kLength);
  CHECK(p.content_length == 5);
  CHECK(p.body == "hello");
  CHECK(p.keep_alive);
}

TEST_CASE("chunked response") {
  Parsed p = parse_response(
      "HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n4;x=y\r\nwiki\r\n5\r\npedia\r\n"
      "0\r\nExpires: never\r\n\r\n");
  REQUIRE(p.ended);
  CHECK(p.framing == Framing::kChunked);
  CHECK(p.body == "wikipedia");
}

TEST_CASE("close-delimited response completes on finish()") {
  ResponseParser parser(Limits{});
  parser.begin(false);
  std::string wire = "HTTP/1.1 200 OK\r\nServer: old\r\n\r\nsome bytes";
  Parsed p = drive(parser, wire);
  CHECK(p.head_seen);
  CHECK_FALSE(p.ended);
  CHECK(p.framing == Framing::kUntilClose);
  CHECK_FALSE(p.keep_alive);
  CHECK(p.body == "some bytes");
  Step s = parser.finish();
  CHECK(s.event == Event::kMessageEnd);
}

TEST_CASE("HTTP/1.0 responses: keep-alive only when asked") {
  CHECK_FALSE(parse_response("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n").keep_alive);
  CHECK(parse_response("HTTP/1.0 200 OK\r\nContent-Length: 0\r\nConnection: keep-alive\r\n\r\n")
            .keep_alive);
  CHECK_FALSE(
      parse_response("HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
          .keep_alive);
}

TEST_CASE("a response to HEAD has no body whatever its headers say") {
  std::string first = "HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n";
  std::string next = "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx";
  ResponseParser parser(Limits{});
  parser.begin(true);
  Parsed p = drive(parser, first + next);
  REQUIRE(p.ended);
  CHECK(p.consumed == first.size());  // the next response's bytes are not taken as a body
  CHECK(p.framing == Framing::kNone);
  CHECK(p.body.empty());
  CHECK(p.keep_alive);
  parser.begin(false);
  Parsed q = drive(parser, next);
  CHECK(q.ended);
  CHECK(q.body == "x");

  Parsed chunked_head = parse_response("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", true);
  CHECK(chunked_head.ended);
  CHECK(chunked_head.framing == Framing::kNone);
}

TEST_CASE("204 and 304 have no body, even with framing headers") {
  for (const char* wire : {"HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n",
                           "HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n",
                           "HTTP/1.1 204 No Content\r\nTransfer-Encoding: chunked\r\n\r\n",
                           "HTTP/1.1 304 Not Modified\r\n\r\n"}) {
    INFO(wire);
    Parsed p = parse_response(wire);
    CHECK(p.ended);
    CHECK(p.consumed == std::string_view(wire).size());
    CHECK(p.framing == Framing::kNone);
    CHECK(p.keep_alive);
  }
}

TEST_CASE("1xx is kHead then kMessageEnd; the final response follows after begin()") {
  std::string interim = "HTTP/1.1 100 Continue\r\n\r\n";
  std::string hints = "HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n";
  std::string final_resp = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
  std::string wire = interim + hints + final_resp;
  ResponseParser parser(Limits{});
  parser.begin(false);
  Parsed a = drive(parser, wire);
  REQUIRE(a.ended);
  CHECK(a.resp_status == 100);
  CHECK(a.consumed == interim.size());
  parser.begin(false);
  Parsed b = drive(parser, std::string_view(wire).substr(interim.size()));
  REQUIRE(b.ended);
  CHECK(b.resp_status == 103);
  CHECK(b.headers.size() == 1);
  parser.begin(false);
  Parsed c = drive(parser, final_resp);
  CHECK(c.ended);
  CHECK(c.body == "ok");
}

TEST_CASE("bytes after a complete response are left to the caller") {
  std::string wire = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokGARBAGE";
  Parsed p = parse_response(wire);
  REQUIRE(p.ended);
  CHECK(p.consumed == wire.size() - 7);
}

TEST_CASE("truncated responses are errors on finish()") {
  struct Trunc {
    const char* wire;
    const char* reason;
  };
  for (Trunc t : {Trunc{"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", "truncated"},
                  Trunc{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", "truncated"},
                  Trunc{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n", "truncated"},
                  Trunc{"HTTP/1.1 200 OK\r\nContent-Le", "truncated"},
                  Trunc{"", "no_response"}}) {
    INFO(t.wire);
    ResponseParser parser(Limits{});
    parser.begin(false);
    Parsed p = drive(parser, t.wire);
    CHECK_FALSE(p.ended);
    Step s = parser.finish();
    CHECK(s.event == Event::kError);
    CHECK(parser.error().status == 502);
    CHECK(parser.error().reason == t.reason);
  }
  // A complete bodiless response followed by EOF is fine even if the caller has not yet fed 0.
  ResponseParser parser(Limits{});
  parser.begin(false);
  std::string head = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
  REQUIRE(parser.feed(head.data(), head.size()).event == Event::kHead);
  CHECK(parser.finish().event == Event::kMessageEnd);
}

TEST_CASE("conflicting or unsupported framing from a backend is a 502") {
  struct Bad {
    const char* wire;
    const char* reason;
  };
  for (Bad b : {Bad{"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
                    "content_length_and_transfer_encoding"},
                Bad{"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n",
                    "duplicate_content_length"},
                Bad{"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc",
                    "duplicate_content_length"},
                Bad{"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", "bad_transfer_encoding"},
                Bad{"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
                    "bad_transfer_encoding"},
                Bad{"HTTP/1.1 200 OK\r\nContent-Length: abc\r\n\r\n", "bad_content_length"},
                Bad{"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: "
                    "upgrade\r\n\r\n",
                    "upgrade_refused"},
                Bad{"HTTP/2.0 200 OK\r\n\r\n", "bad_version"},
                Bad{"HTTP/1.1 200 OK\r\nX: a\r\n b\r\n\r\n", "obs_fold"},
                Bad{"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\nx", "bare_lf"},
                Bad{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nz\r\n", "bad_chunk"}}) {
    INFO(b.wire);
    Parsed p = parse_response(b.wire);
    CHECK(p.failed);
    CHECK(p.status == 502);
    CHECK(p.reason == b.reason);
  }
}

TEST_CASE("response limits") {
  Limits lim;
  lim.max_header_bytes = 128;
  ResponseParser parser(lim);
  parser.begin(false);
  Parsed p = drive(parser, "HTTP/1.1 200 OK\r\nX: " + std::string(200, 'a') + "\r\n\r\n");
  CHECK(p.status == 502);
  CHECK(p.reason == "header_too_large");
}

TEST_CASE("property: any split of a response gives the same head and body as one feed") {
  const std::string wire =
      "HTTP/1.1 200 Fine Thanks\r\nX-Backend: b1\r\nContent-Type: application/octet-stream\r\n"
      "X-Long: " + std::string(41, 'v') + "\r\nContent-Length: 16\r\n\r\n0123456789abcdef";
  const Parsed whole = parse_response(wire);
  REQUIRE(whole.ended);
  std::mt19937 rng(20240612);
  for (int round = 0; round < 300; ++round) {
    std::set<size_t> cut_set;
    if (round == 0) {
      for (size_t i = 1; i < wire.size(); ++i) cut_set.insert(i);  // byte at a time
    } else {
      for (size_t i = rng() % 6 + 1; i > 0; --i) cut_set.insert(rng() % wire.size());
    }
    ResponseParser parser(Limits{});
    parser.begin(false);
    const Parsed split = drive(parser, wire, std::vector<size_t>(cut_set.begin(), cut_set.end()));
    INFO("round " << round);
    REQUIRE(split.ended);
    CHECK(split.consumed == wire.size());
    CHECK(split.resp_status == whole.resp_status);
    CHECK(split.resp_reason == whole.resp_reason);
    CHECK(split.headers == whole.headers);
    CHECK(split.content_length == whole.content_length);
    CHECK(split.body == whole.body);
  }
}

// Feeds `wire` until the parser needs more; returns the body bytes it reported.
static std::string feed_all(ResponseParser& parser, std::string_view wire, Event* last) {
  std::string body;
  size_t off = 0;
  for (int i = 0; i < 100; ++i) {
    Step s = parser.feed(wire.data() + off, wire.size() - off);
    off += s.consumed;
    *last = s.event;
    if (s.event == Event::kBody) body.append(s.body);
    if (s.event == Event::kNeedMore || s.event == Event::kMessageEnd || s.event == Event::kError)
      break;
  }
  return body;
}

TEST_CASE("skip_body advances a Content-Length body the parser never saw (splice)") {
  ResponseParser parser(Limits{});
  parser.begin(false);
  Event last{};
  std::string seen =
      feed_all(parser, "HTTP/1.1 200 OK\r\nContent-Length: 300000\r\n\r\n0123456789", &last);
  CHECK(last == Event::kNeedMore);
  CHECK(seen == "0123456789");
  CHECK(parser.body_left() == 300000 - 10);
  parser.skip_body(100000);
  CHECK(parser.body_left() == 300000 - 10 - 100000);
  parser.skip_body(parser.body_left());
  CHECK(parser.body_left() == 0);
  // No body event is left over for the skipped bytes: the message just ends, and the next
  // response parses as usual.
  Step s = parser.feed(nullptr, 0);
  CHECK(s.event == Event::kMessageEnd);
  parser.begin(false);
  seen = feed_all(parser, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", &last);
  CHECK(last == Event::kMessageEnd);
  CHECK(seen == "ok");
}

TEST_CASE("body_left is 0 outside a body") {
  ResponseParser parser(Limits{});
  parser.begin(false);
  CHECK(parser.body_left() == 0);  // no head yet
  Event last{};
  ResponseParser head_resp(Limits{});
  head_resp.begin(true);
  feed_all(head_resp, "HTTP/1.1 200 OK\r\nContent-Length: 99999\r\n\r\n", &last);
  CHECK(head_resp.body_left() == 0);  // a response to HEAD has no body
}

TEST_CASE("body_left of a chunked body is the current chunk's data, 0 at its lines") {
  ResponseParser parser(Limits{});
  parser.begin(false);
  Event last{};
  std::string seen =
      feed_all(parser, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", &last);
  CHECK(seen == "ab");
  CHECK(parser.body_left() == 3);
  parser.skip_body(3);  // spliced
  CHECK(parser.body_left() == 0);  // the CRLF after the data is due
  feed_all(parser, "\r", &last);
  CHECK(parser.body_left() == 0);
  feed_all(parser, "\n1", &last);
  CHECK(parser.body_left() == 0);  // inside a chunk-size line
  feed_all(parser, "0000;x=y\r\n", &last);
  CHECK(last == Event::kNeedMore);
  CHECK(parser.body_left() == 0x10000);
  CHECK(!parser.last_chunk_seen());
  parser.skip_body(0x10000);
  feed_all(parser, "\r\n0\r\n", &last);
  CHECK(parser.last_chunk_seen());
  CHECK(parser.body_left() == 0);
  seen = feed_all(parser, "\r\n", &last);
  CHECK(last == Event::kMessageEnd);
}

TEST_CASE("a bad chunk-size line after spliced chunk data is an error") {
  ResponseParser parser(Limits{});
  parser.begin(false);
  Event last{};
  feed_all(parser, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n8\r\n", &last);
  CHECK(parser.body_left() == 8);
  parser.skip_body(8);
  feed_all(parser, "\r\nzz\r\n", &last);
  CHECK(last == Event::kError);
  CHECK(parser.body_left() == 0);
}
