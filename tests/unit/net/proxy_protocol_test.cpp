// Unit tests of net::ProxyHeaderParser (PROXY protocol v1/v2) and core::Cidr, the trust rule.
#include <arpa/inet.h>
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "rondel/core/cidr.h"
#include "rondel/net/proxy_protocol.h"

using namespace rondel;
using net::ProxyHeaderParser;
using Status = ProxyHeaderParser::Status;

namespace {

const std::string kV2Sig("\r\n\r\n\0\r\nQUIT\n", 12);

// A v2 header: version/command byte, family/transport byte, then the payload.
std::string v2(uint8_t ver_cmd, uint8_t fam, const std::string& payload) {
  std::string h = kV2Sig;
  h += static_cast<char>(ver_cmd);
  h += static_cast<char>(fam);
  h += static_cast<char>(payload.size() >> 8);
  h += static_cast<char>(payload.size() & 0xFF);
  return h + payload;
}

std::string bytes(std::initializer_list<int> b) {
  std::string s;
  for (int c : b) s += static_cast<char>(c);
  return s;
}

std::string v2_inet_payload() {
  // 192.0.2.1:56324 -> 198.51.100.7:443
  return bytes({192, 0, 2, 1, 198, 51, 100, 7, 0xDC, 0x04, 0x01, 0xBB});
}

struct Outcome {
  Status status = Status::kNeedMore;
  size_t consumed = 0;  // header bytes over all pieces
  ProxyHeaderParser parser;
};

// Feeds `wire` cut at `cuts` (ascending positions); stops at the first decided status.
void run(Outcome& o, const std::string& wire, const std::vector<size_t>& cuts = {}) {
  size_t at = 0;
  std::vector<size_t> ends = cuts;
  ends.push_back(wire.size());
  for (size_t end : ends) {
    auto st = o.parser.feed(reinterpret_cast<const uint8_t*>(wire.data()) + at, end - at);
    o.consumed += st.consumed;
    o.status = st.status;
    if (st.status != Status::kNeedMore) {
      CHECK(st.consumed <= end - at);
      return;
    }
    CHECK(st.consumed == end - at);
    at = end;
  }
}

std::string ip(const net::ProxyEndpoint& e, int af) {
  char buf[64];
  inet_ntop(af, e.addr.data(), buf, sizeof buf);
  return buf;
}

}  // namespace

TEST_CASE("v1 TCP4 header, then the client's bytes") {
  const std::string hdr = "PROXY TCP4 192.0.2.1 198.51.100.7 56324 443\r\n";
  Outcome o;
  run(o, hdr + "GET / HTTP/1.1\r\n");
  REQUIRE(o.status == Status::kDone);
  CHECK(o.consumed == hdr.size());
  const auto& h = o.parser.header();
  CHECK(h.version == net::ProxyVersion::kV1);
  CHECK(h.command == net::ProxyCommand::kProxy);
  CHECK(h.family == net::ProxyFamily::kInet);
  CHECK(h.carries_address());
  CHECK(h.length == hdr.size());
  CHECK(ip(h.source, AF_INET) == "192.0.2.1");
  CHECK(ip(h.destination, AF_INET) == "198.51.100.7");
  CHECK(h.source.port == 56324);
  CHECK(h.destination.port == 443);
}

TEST_CASE("v1 TCP6 header") {
  Outcome o;
  run(o, "PROXY TCP6 2001:db8::1 2001:db8:0:1::ff 65535 0\r\n");
  REQUIRE(o.status == Status::kDone);
  const auto& h = o.parser.header();
  CHECK(h.family == net::ProxyFamily::kInet6);
  CHECK(ip(h.source, AF_INET6) == "2001:db8::1");
  CHECK(ip(h.destination, AF_INET6) == "2001:db8:0:1::ff");
  CHECK(h.source.port == 65535);
  CHECK(h.destination.port == 0);
}

TEST_CASE("v1 UNKNOWN keeps the real addresses, with or without trailing fields") {
  for (std::string hdr : {std::string("PROXY UNKNOWN\r\n"),
                          std::string("PROXY UNKNOWN ffff:f...f:ffff ffff:f...f:ffff 65535 65535\r\n")}) {
    Outcome o;
    run(o, hdr + "x");
    REQUIRE(o.status == Status::kDone);
    CHECK(o.consumed == hdr.size());
    CHECK(o.parser.header().family == net::ProxyFamily::kUnspec);
    CHECK_FALSE(o.parser.header().carries_address());
  }
}

TEST_CASE("v2 PROXY over TCP/IPv4, with TLVs skipped") {
  // TLVs: ALPN "h2" (0x01), an AWS VPC endpoint id (0xEA), an empty NOOP (0x04).
  std::string tlvs = bytes({0x01, 0x00, 0x02, 'h', '2', 0xEA, 0x00, 0x04, 1, 'v', 'p', 'c',
                            0x04, 0x00, 0x00});
  const std::string hdr = v2(0x21, 0x11, v2_inet_payload() + tlvs);
  Outcome o;
  run(o, hdr + "GET");
  REQUIRE(o.status == Status::kDone);
  CHECK(o.consumed == hdr.size());
  const auto& h = o.parser.header();
  CHECK(h.version == net::ProxyVersion::kV2);
  CHECK(h.length == hdr.size());
  CHECK(h.carries_address());
  CHECK(ip(h.source, AF_INET) == "192.0.2.1");
  CHECK(ip(h.destination, AF_INET) == "198.51.100.7");
  CHECK(h.source.port == 56324);
  CHECK(h.destination.port == 443);
}

TEST_CASE("v2 PROXY over TCP/IPv6") {
  std::string p;
  uint8_t a[16], b[16];
  inet_pton(AF_INET6, "2001:db8::7", a);
  inet_pton(AF_INET6, "::ffff:10.1.2.3", b);
  p.append(reinterpret_cast<char*>(a), 16);
  p.append(reinterpret_cast<char*>(b), 16);
  p += bytes({0x30, 0x39, 0x00, 0x50});
  Outcome o;
  run(o, v2(0x21, 0x21, p));
  REQUIRE(o.status == Status::kDone);
  const auto& h = o.parser.header();
  CHECK(h.family == net::ProxyFamily::kInet6);
  CHECK(ip(h.source, AF_INET6) == "2001:db8::7");
  CHECK(ip(h.destination, AF_INET6) == "::ffff:10.1.2.3");
  CHECK(h.source.port == 12345);
  CHECK(h.destination.port == 80);
}

TEST_CASE("v2 LOCAL, AF_UNSPEC and AF_UNIX keep the real addresses") {
  struct Case {
    uint8_t ver_cmd, fam;
    std::string payload;
    net::ProxyCommand cmd;
    net::ProxyFamily family;
  };
  const Case cases[] = {
      {0x20, 0x00, "", net::ProxyCommand::kLocal, net::ProxyFamily::kUnspec},
      // LOCAL with addresses (a balancer's health check may send some): ignored.
      {0x20, 0x11, v2_inet_payload(), net::ProxyCommand::kLocal, net::ProxyFamily::kInet},
      {0x21, 0x00, "", net::ProxyCommand::kProxy, net::ProxyFamily::kUnspec},
      {0x21, 0x31, std::string(216, 'u'), net::ProxyCommand::kProxy, net::ProxyFamily::kUnix},
  };
  for (const auto& c : cases) {
    Outcome o;
    const std::string hdr = v2(c.ver_cmd, c.fam, c.payload);
    run(o, hdr + "after");
    REQUIRE(o.status == Status::kDone);
    CHECK(o.consumed == hdr.size());
    CHECK(o.parser.header().command == c.cmd);
    CHECK(o.parser.header().family == c.family);
    CHECK_FALSE(o.parser.header().carries_address());
  }
}

TEST_CASE("split input at every byte gives the same header") {
  const std::string wires[] = {
      "PROXY TCP4 192.0.2.1 198.51.100.7 56324 443\r\nGET",
      "PROXY UNKNOWN whatever\r\nGET",
      v2(0x21, 0x11, v2_inet_payload() + bytes({0x02, 0x00, 0x03, 'a', 'b', 'c'})) + "GET",
      v2(0x20, 0x00, "") + "GET",
  };
  for (const auto& wire : wires) {
    Outcome whole;
    run(whole, wire);
    REQUIRE(whole.status == Status::kDone);
    for (size_t cut = 1; cut < wire.size(); ++cut) {
      Outcome o;
      run(o, wire, {cut});
      REQUIRE(o.status == Status::kDone);
      CHECK(o.consumed == whole.consumed);
      CHECK(o.parser.header().source.addr == whole.parser.header().source.addr);
      CHECK(o.parser.header().destination.port == whole.parser.header().destination.port);
    }
    // One byte at a time.
    std::vector<size_t> every;
    for (size_t i = 1; i < wire.size(); ++i) every.push_back(i);
    Outcome o;
    run(o, wire, every);
    REQUIRE(o.status == Status::kDone);
    CHECK(o.consumed == whole.consumed);
    CHECK(o.parser.header().source.port == whole.parser.header().source.port);
  }
}

TEST_CASE("truncated headers need more, never done") {
  const std::string wires[] = {
      "PROXY TCP4 192.0.2.1 198.51.100.7 56324 443\r\n",
      v2(0x21, 0x11, v2_inet_payload()),
  };
  for (const auto& wire : wires) {
    for (size_t n = 0; n < wire.size(); ++n) {
      Outcome o;
      run(o, wire.substr(0, n));
      CHECK(o.status == Status::kNeedMore);
      CHECK(o.consumed == n);
    }
  }
}

TEST_CASE("invalid headers say why") {
  struct Case {
    std::string wire;
    net::ProxyReject why;
  };
  const Case cases[] = {
      {"GET / HTTP/1.1\r\n", net::ProxyReject::kNotProxy},
      {"PROXZ TCP4", net::ProxyReject::kNotProxy},
      {std::string("\r\n\r\n\0\r\nQUIX\n", 12), net::ProxyReject::kNotProxy},
      {"PROXY TCP5 1.2.3.4 5.6.7.8 1 2\r\n", net::ProxyReject::kMalformed},
      {"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n", net::ProxyReject::kMalformed},
      {"PROXY TCP4 1.2.3.4  5.6.7.8 1 2\r\n", net::ProxyReject::kMalformed},
      {"PROXY TCP4 1.2.3.4 5.6.7.8 1 65536\r\n", net::ProxyReject::kMalformed},
      {"PROXY TCP4 1.2.3.4 5.6.7.8 1 2 3\r\n", net::ProxyReject::kMalformed},
      {"PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n", net::ProxyReject::kMalformed},
      {"PROXY TCP4 ::1 5.6.7.8 1 2\r\n", net::ProxyReject::kMalformed},
      {"PROXY TCP6 1.2.3.4 ::1 1 2\r\n", net::ProxyReject::kMalformed},
      {"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\rX", net::ProxyReject::kMalformed},
      {"PROXY TCP4 1.2.3.4 5.6.7.8 -1 2\r\n", net::ProxyReject::kMalformed},
      {"PROXY TCP4\r\n", net::ProxyReject::kMalformed},
      {"PROXY " + std::string(120, 'A'), net::ProxyReject::kMalformed},
      {"PROXY UNKNOWN " + std::string(100, 'x') + "\r\n", net::ProxyReject::kTooLong},
      {v2(0x11, 0x11, v2_inet_payload()), net::ProxyReject::kUnsupported},   // version 1 in v2
      {v2(0x22, 0x11, v2_inet_payload()), net::ProxyReject::kUnsupported},   // command 2
      {v2(0x21, 0x41, v2_inet_payload()), net::ProxyReject::kUnsupported},   // family 4
      {v2(0x21, 0x12, v2_inet_payload()), net::ProxyReject::kUnsupported},   // UDP
      {v2(0x21, 0x11, "short"), net::ProxyReject::kMalformed},               // no room for addresses
      {v2(0x21, 0x21, v2_inet_payload()), net::ProxyReject::kMalformed},     // IPv6 needs 36
      {v2(0x21, 0x11, v2_inet_payload() + bytes({0x01, 0x00, 0x05, 'h'})),   // TLV past the end
       net::ProxyReject::kMalformed},
      {v2(0x21, 0x11, v2_inet_payload() + bytes({0x01, 0x00})), net::ProxyReject::kMalformed},
      {v2(0x21, 0x11, v2_inet_payload() + std::string(ProxyHeaderParser::kMaxV2Payload, '\0')),
       net::ProxyReject::kTooLong},
  };
  for (const auto& c : cases) {
    CAPTURE(c.wire);
    Outcome o;
    run(o, c.wire);
    CHECK(o.status == Status::kInvalid);
    CHECK(o.parser.error() == c.why);
    // Decided: more input changes nothing.
    auto again = o.parser.feed(reinterpret_cast<const uint8_t*>("x"), 1);
    CHECK(again.status == Status::kInvalid);
    CHECK(again.consumed == 0);
  }
}

TEST_CASE("the length bounds are exact") {
  // A v1 line of exactly 107 bytes is accepted; 108 is too long.
  std::string ok = "PROXY UNKNOWN ";
  ok += std::string(ProxyHeaderParser::kMaxV1Length - ok.size() - 2, 'x') + "\r\n";
  REQUIRE(ok.size() == ProxyHeaderParser::kMaxV1Length);
  Outcome a;
  run(a, ok);
  CHECK(a.status == Status::kDone);
  Outcome b;
  run(b, "PROXY UNKNOWN x" + ok.substr(14));
  CHECK(b.status == Status::kInvalid);
  CHECK(b.parser.error() == net::ProxyReject::kTooLong);
  // v2: a payload of exactly kMaxV2Payload (addresses + one TLV) is accepted.
  const size_t tlv_value = ProxyHeaderParser::kMaxV2Payload - 12 - 3;
  std::string tlv = bytes({0xE0, static_cast<int>(tlv_value >> 8), static_cast<int>(tlv_value & 0xFF)});
  tlv += std::string(tlv_value, 'z');
  Outcome c;
  run(c, v2(0x21, 0x11, v2_inet_payload() + tlv));
  CHECK(c.status == Status::kDone);
  CHECK(c.parser.header().length == ProxyHeaderParser::kMaxV2Length);
}

TEST_CASE("reject and version names are the metric labels") {
  CHECK(net::proxy_reject_name(net::ProxyReject::kNotProxy) == "missing");
  CHECK(net::proxy_reject_name(net::ProxyReject::kTimeout) == "timeout");
  CHECK(net::proxy_version_name(net::ProxyVersion::kV2) == "v2");
}

TEST_CASE("Cidr: parse and contains") {
  core::Cidr c;
  std::string why;
  REQUIRE(core::Cidr::parse("10.0.0.0/8", c, why));
  uint8_t in[4] = {10, 200, 3, 4}, out[4] = {11, 0, 0, 1};
  CHECK(c.contains(4, in));
  CHECK_FALSE(c.contains(4, out));
  uint8_t mapped[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 1, 1, 1};
  CHECK(c.contains(6, mapped));  // a dual-stack socket's IPv4 peer
  REQUIRE(core::Cidr::parse("127.0.0.1", c, why));
  CHECK(c.prefix == 32);
  REQUIRE(core::Cidr::parse("0.0.0.0/0", c, why));
  CHECK(c.contains(4, out));
  REQUIRE(core::Cidr::parse("2001:db8::/33", c, why));
  uint8_t v6[16];
  inet_pton(AF_INET6, "2001:db8:7fff::1", v6);
  CHECK(c.contains(6, v6));
  inet_pton(AF_INET6, "2001:db8:8000::1", v6);
  CHECK_FALSE(c.contains(6, v6));
  CHECK_FALSE(c.contains(4, in));
  for (const char* bad : {"10.0.0.1/8", "10.0.0.0/33", "::/129", "10.0.0.0/", "10.0.0.0/x",
                          "host.example", "", "10.0.0.0/8/8"}) {
    CAPTURE(bad);
    CHECK_FALSE(core::Cidr::parse(bad, c, why));
    CHECK_FALSE(why.empty());
  }
}
