// HopByHopMarker: which fields a forwarder drops (RFC 9110 7.6.1), against a naive reference.
#include <doctest/doctest.h>

#include <random>
#include <string>
#include <vector>

#include "rondel/http/message.h"
#include "rondel/http/parser.h"

using namespace rondel::http;

namespace {

// The definition, written the obvious way (fields x tokens): the marker must agree with it.
bool naive_hop_by_hop(std::string_view name, std::span<const Header> all) {
  for (std::string_view fixed : {"Connection", "Keep-Alive", "Proxy-Connection", "TE", "Trailer",
                                 "Transfer-Encoding", "Upgrade"}) {
    if (iequals(name, fixed)) return true;
  }
  if (iequals(name, "Host")) return false;
  for (const Header& h : all) {
    if (!iequals(h.name, "Connection")) continue;
    std::string_view list = h.value;
    while (!list.empty()) {
      const size_t comma = list.find(',');
      std::string_view token = list.substr(0, comma);
      while (!token.empty() && (token.front() == ' ' || token.front() == '\t'))
        token.remove_prefix(1);
      while (!token.empty() && (token.back() == ' ' || token.back() == '\t'))
        token.remove_suffix(1);
      if (iequals(token, name)) return true;
      if (comma == std::string_view::npos) break;
      list.remove_prefix(comma + 1);
    }
  }
  return false;
}

std::vector<std::string> marked_names(std::vector<Header> h) {
  HopByHopMarker().mark(h);
  std::vector<std::string> out;
  for (const Header& f : h) {
    if (f.hop_by_hop) out.emplace_back(f.name);
  }
  return out;
}

}  // namespace

TEST_CASE("hop-by-hop: the fixed names, names a Connection field lists, never Host") {
  std::vector<Header> h = {{"Host", "a"},
                           {"Connection", "keep-alive, X-Secret , host"},
                           {"X-Secret", "1"},
                           {"keep-alive", "timeout=5"},
                           {"TE", "trailers"},
                           {"Trailer", "X"},
                           {"UPGRADE", "h2c"},
                           {"proxy-connection", "close"},
                           {"transfer-encoding", "chunked"},
                           {"Content-Length", "1"},
                           {"X-Other", "2"}};
  CHECK(marked_names(h) == std::vector<std::string>{"Connection", "X-Secret", "keep-alive", "TE",
                                                    "Trailer", "UPGRADE", "proxy-connection",
                                                    "transfer-encoding"});
}

TEST_CASE("hop-by-hop: many tokens (the table path) mark every field of a listed name") {
  std::vector<Header> h = {{"X-A", "1"}, {"Connection", "t1, t2, x-a, t3, t4, t5, HOST, x-b"},
                           {"x-a", "2"}, {"Host", "h"},
                           {"X-B", "3"}, {"X-C", "4"},
                           {"X-A", "5"}, {"Connection", "x-a, X-A"}};
  CHECK(marked_names(h) ==
        std::vector<std::string>{"X-A", "Connection", "x-a", "X-B", "X-A", "Connection"});
}

TEST_CASE("hop-by-hop: a marker reused across heads clears old marks") {
  HopByHopMarker marker;
  std::vector<Header> first = {{"Connection", "a, b, c, d, e, X-1"}, {"X-1", "1"}};
  marker.mark(first);
  CHECK(first[1].hop_by_hop);
  std::vector<Header> second = {{"X-1", "1"}, {"X-2", "2"}};
  second[0].hop_by_hop = true;  // a stale mark from whoever built the head
  marker.mark(second);
  CHECK_FALSE(second[0].hop_by_hop);
  CHECK_FALSE(second[1].hop_by_hop);
}

TEST_CASE("hop-by-hop: agrees with the naive definition on random heads") {
  std::mt19937 rng(13);
  const std::vector<std::string> names = {
      "Host",       "X-A",    "x-a",    "X-B",    "Connection",
      "TE",         "Accept", "ACCEPT", "Cookie", "X-Forwarded-For",
      "keep-alive", "a^",     "A~"};
  for (int round = 0; round < 2000; ++round) {
    std::vector<std::string> storage;
    const size_t fields = rng() % 12;
    for (size_t i = 0; i < fields; ++i) {
      std::string name = names[rng() % names.size()];
      std::string value;
      if (name == "Connection") {
        const size_t tokens = rng() % 9;
        for (size_t t = 0; t < tokens; ++t) {
          value += (t ? ", " : "") + names[rng() % names.size()];
        }
      } else {
        value = "v";
      }
      storage.push_back(std::move(name));
      storage.push_back(std::move(value));
    }
    std::vector<Header> h;
    for (size_t i = 0; i < storage.size(); i += 2) h.push_back({storage[i], storage[i + 1]});
    HopByHopMarker().mark(h);
    for (const Header& f : h) {
      INFO(round, " ", f.name);
      CHECK(f.hop_by_hop == naive_hop_by_hop(f.name, h));
    }
  }
}

TEST_CASE("hop-by-hop: the parser marks request and response heads") {
  RequestParser parser(Limits{});
  const std::string wire =
      "GET / HTTP/1.1\r\nHost: h\r\nConnection: X-Drop\r\nX-Drop: 1\r\nX-Keep: 2\r\n\r\n";
  REQUIRE(parser.feed(wire.data(), wire.size()).event == Event::kHead);
  std::vector<bool> marks;
  for (const Header& f : parser.head().headers) marks.push_back(f.hop_by_hop);
  CHECK(marks == std::vector<bool>{false, true, true, false});

  ResponseParser resp(Limits{});
  resp.begin(false);
  const std::string rwire =
      "HTTP/1.1 200 OK\r\nConnection: X-B\r\nX-B: 1\r\nContent-Length: 0\r\n\r\n";
  REQUIRE(resp.feed(rwire.data(), rwire.size()).event == Event::kHead);
  marks.clear();
  for (const Header& f : resp.head().headers) marks.push_back(f.hop_by_hop);
  CHECK(marks == std::vector<bool>{true, true, false});
}
