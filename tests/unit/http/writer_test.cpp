// Writers: exact bytes sent to backends and clients.
#include "rondel/http/writer.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "parse_driver.h"

using namespace rondel::http;
using rondel::http::test::Parsed;

namespace {

// Hand-built fields, marked as a parser marks them.
std::vector<Header> marked(std::vector<Header> h) {
  HopByHopMarker().mark(h);
  return h;
}

RequestHead make_request(std::span<const Header> headers, Framing framing = Framing::kNone,
                         uint64_t length = 0) {
  RequestHead r;
  r.method = "POST";
  r.target = "/up?x=1";
  r.headers = headers;
  r.framing = framing;
  r.content_length = length;
  return r;
}

}  // namespace

TEST_CASE("iequals") {
  CHECK(iequals("Content-Length", "content-LENGTH"));
  CHECK_FALSE(iequals("Content-Length", "Content-Lengt"));
  CHECK_FALSE(iequals("a^", "A~"));  // '^' | 0x20 == '~', but they are not letters
}

TEST_CASE("request head: hop-by-hop dropped, framing rewritten, XFF appended, proto replaced") {
  std::vector<Header> h = marked({
      {"Host", "example.com"},
      {"Connection", "keep-alive, X-Hop"},
      {"X-Hop", "drop me"},
      {"Keep-Alive", "timeout=5"},
      {"TE", "trailers"},
      {"Transfer-Encoding", "chunked"},
      {"Expect", "100-continue"},
      {"X-Forwarded-Proto", "https"},
      {"X-Forwarded-For", "10.0.0.1"},
      {"Accept", "*/*"},
      {"X-Forwarded-For", "10.0.0.2, 10.0.0.3"},
  });
  std::string out;
  write_request_head(make_request(h, Framing::kChunked), ForwardRequest{"192.0.2.7", "http"}, out);
  CHECK(out ==
        "POST /up?x=1 HTTP/1.1\r\n"
        "Host: example.com\r\n"
        "Accept: */*\r\n"
        "X-Forwarded-For: 10.0.0.1, 10.0.0.2, 10.0.0.3, 192.0.2.7\r\n"
        "X-Forwarded-Proto: http\r\n"
        "Transfer-Encoding: chunked\r\n"
        "\r\n");
}

TEST_CASE("request head without forwarded fields: the client's X-Forwarded-* pass unchanged") {
  std::vector<Header> h = marked({
      {"Host", "example.com"},
      {"Connection", "X-Forwarded-Proto"},  // hop-by-hop by the client's own word: dropped
      {"X-Forwarded-Proto", "https"},
      {"X-Forwarded-For", "10.0.0.1"},
      {"Accept", "*/*"},
      {"X-Forwarded-For", "10.0.0.2"},
  });
  ForwardRequest fwd{"192.0.2.7", "http"};
  fwd.forwarded = false;
  std::string out;
  write_request_head(make_request(h, Framing::kLength, 5), fwd, out);
  CHECK(out ==
        "POST /up?x=1 HTTP/1.1\r\n"
        "Host: example.com\r\n"
        "X-Forwarded-For: 10.0.0.1\r\n"
        "Accept: */*\r\n"
        "X-Forwarded-For: 10.0.0.2\r\n"
        "Content-Length: 5\r\n"
        "\r\n");
}

TEST_CASE("request head: length framing, no XFF from client, HTTP/1.0 client without Host") {
  std::vector<Header> h = marked({{"Content-Length", "3"}, {"User-Agent", "ua"}});
  RequestHead r = make_request(h, Framing::kLength, 3);
  r.version_minor = 0;
  std::string out;
  ForwardRequest fwd{"::1", "https", "backend.internal"};
  write_request_head(r, fwd, out);
  CHECK(out ==
        "POST /up?x=1 HTTP/1.1\r\n"
        "User-Agent: ua\r\n"
        "Host: backend.internal\r\n"
        "X-Forwarded-For: ::1\r\n"
        "X-Forwarded-Proto: https\r\n"
        "Content-Length: 3\r\n"
        "\r\n");
}

TEST_CASE("request head written from a parsed request round-trips through the parser") {
  std::string wire =
      "PUT /k HTTP/1.1\r\nHost: h\r\nConnection: close\r\nContent-Length: 2\r\n"
      "X-Forwarded-For: 1.1.1.1\r\n\r\nok";
  RequestParser parser(Limits{});
  Step s = parser.feed(wire.data(), wire.size());
  REQUIRE(s.event == Event::kHead);
  std::string out;
  write_request_head(parser.head(), ForwardRequest{"2.2.2.2"}, out);
  CHECK(out ==
        "PUT /k HTTP/1.1\r\nHost: h\r\nX-Forwarded-For: 1.1.1.1, 2.2.2.2\r\n"
        "X-Forwarded-Proto: http\r\nContent-Length: 2\r\n\r\n");
  Parsed again = rondel::http::test::parse_request(out + "ok");
  CHECK(again.ended);
  CHECK(again.body == "ok");
}

TEST_CASE("choose_client_framing") {
  RequestHead req11;
  RequestHead req10;
  req10.version_minor = 0;
  req10.keep_alive = false;
  RequestHead req10ka = req10;
  req10ka.keep_alive = true;
  ResponseHead len;
  len.framing = Framing::kLength;
  ResponseHead chunked;
  chunked.framing = Framing::kChunked;
  ResponseHead eof;
  eof.framing = Framing::kUntilClose;

  ClientFraming f = choose_client_framing(req11, len);
  CHECK(f.framing == Framing::kLength);
  CHECK_FALSE(f.close_after);
  f = choose_client_framing(req11, eof);
  CHECK(f.framing == Framing::kChunked);
  CHECK_FALSE(f.close_after);
  f = choose_client_framing(req10ka, chunked);
  CHECK(f.framing == Framing::kUntilClose);
  CHECK(f.close_after);
  f = choose_client_framing(req10ka, len);
  CHECK(f.framing == Framing::kLength);
  CHECK_FALSE(f.close_after);
  f = choose_client_framing(req10, len);
  CHECK(f.close_after);
}

TEST_CASE("response head: framing and Connection per client") {
  std::vector<Header> h = marked({{"Content-Type", "text/html"},
                                  {"Transfer-Encoding", "chunked"},
                                  {"Connection", "X-Backend-Only"},
                                  {"X-Backend-Only", "1"},
                                  {"Content-Length", "999"},
                                  {"Cache-Control", "max-age=60"}});
  ResponseHead resp;
  resp.status = 200;
  resp.reason = "OK";
  resp.headers = h;
  resp.framing = Framing::kChunked;
  RequestHead req11;
  std::string out;
  write_response_head(req11, resp, choose_client_framing(req11, resp), out);
  CHECK(out ==
        "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nCache-Control: max-age=60\r\n"
        "Transfer-Encoding: chunked\r\n\r\n");

  RequestHead req10;
  req10.version_minor = 0;
  out.clear();
  write_response_head(req10, resp, choose_client_framing(req10, resp), out);
  CHECK(out ==
        "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nCache-Control: max-age=60\r\n"
        "Connection: close\r\n\r\n");

  resp.framing = Framing::kLength;
  resp.content_length = 42;
  req10.keep_alive = true;
  out.clear();
  write_response_head(req10, resp, choose_client_framing(req10, resp), out);
  CHECK(out ==
        "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nCache-Control: max-age=60\r\n"
        "Content-Length: 42\r\nConnection: keep-alive\r\n\r\n");
}

TEST_CASE("response head to HEAD keeps the backend's Content-Length") {
  std::vector<Header> h = marked({{"Content-Length", "1234"}});
  ResponseHead resp;
  resp.status = 200;
  resp.reason = "OK";
  resp.headers = h;
  resp.framing = Framing::kNone;
  RequestHead head_req;
  head_req.is_head = true;
  std::string out;
  write_response_head(head_req, resp, choose_client_framing(head_req, resp), out);
  CHECK(out == "HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n");
  resp.status = 204;
  resp.reason = "No Content";
  RequestHead get;
  out.clear();
  write_response_head(get, resp, choose_client_framing(get, resp), out);
  CHECK(out == "HTTP/1.1 204 No Content\r\n\r\n");
}

TEST_CASE("interim head") {
  std::vector<Header> h = marked({{"Link", "</a.css>; rel=preload"}, {"Connection", "keep-alive"}});
  ResponseHead resp;
  resp.status = 103;
  resp.reason = "Early Hints";
  resp.headers = h;
  std::string out;
  write_interim_head(resp, out);
  CHECK(out == "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n");
  ResponseHead cont;
  cont.status = 100;
  cont.reason = "Continue";
  out.clear();
  write_interim_head(cont, out);
  CHECK(out == "HTTP/1.1 100 Continue\r\n\r\n");
}

TEST_CASE("chunk framing helpers") {
  char buf[18];
  CHECK(std::string_view(buf, chunk_header(0x1a2b, buf)) == "1a2b\r\n");
  CHECK(std::string_view(buf, chunk_header(0, buf)) == "0\r\n");
  CHECK(std::string_view(buf, chunk_header(~uint64_t{0}, buf)) == "ffffffffffffffff\r\n");
  CHECK(kLastChunk == "0\r\n\r\n");
}

TEST_CASE("canned responses are complete, parseable and self-consistent") {
  CHECK(canned_response(404) ==
        "HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: 14\r\n"
        "Connection: close\r\n\r\n404 Not Found\n");
  for (uint16_t status : {400, 404, 405, 413, 414, 431, 500, 501, 502, 503, 504, 505, 999}) {
    INFO(status);
    std::string_view text = canned_response(status);
    CHECK(text.data() == canned_response(status).data());  // static storage
    ResponseParser parser(Limits{});
    parser.begin(false);
    Parsed p = rondel::http::test::drive(parser, text);
    REQUIRE(p.ended);
    CHECK(p.consumed == text.size());
    CHECK(p.resp_status == (status == 999 ? 500 : status));
    CHECK(p.body.substr(0, 3) == std::to_string(p.resp_status));
    CHECK_FALSE(p.keep_alive);
  }
}

TEST_CASE("writers reuse the caller's capacity") {
  std::vector<Header> h = marked({{"Host", "a"}});
  RequestHead r = make_request(h);
  std::string out;
  out.reserve(512);
  const char* before = out.data();
  for (int i = 0; i < 10; ++i) {
    out.clear();
    write_request_head(r, ForwardRequest{"1.2.3.4"}, out);
  }
  CHECK(out.data() == before);
}
