// Unit tests of net::write_proxy_v2: what it writes parses back (ProxyHeaderParser) to the
// client address and the listener address, for IPv4, IPv6, an unknown destination and a
// client address that is none (LOCAL).
#include <arpa/inet.h>
#include <doctest/doctest.h>

#include <cstring>
#include <string>

#include "rondel/net/proxy_header_writer.h"
#include "rondel/net/proxy_protocol.h"

using namespace rondel::net;

namespace {

ProxyHeader parse_back(const char* p, size_t n) {
  ProxyHeaderParser parser;
  auto st = parser.feed(reinterpret_cast<const uint8_t*>(p), n);
  REQUIRE(st.status == ProxyHeaderParser::Status::kDone);
  CHECK(st.consumed == n);
  return parser.header();
}

sockaddr_storage v4(const char* ip, uint16_t port) {
  sockaddr_storage ss{};
  auto* s = reinterpret_cast<sockaddr_in*>(&ss);
  s->sin_family = AF_INET;
  s->sin_port = htons(port);
  inet_pton(AF_INET, ip, &s->sin_addr);
  return ss;
}

}  // namespace

TEST_CASE("an IPv4 client to an IPv4 listener") {
  char out[kProxyV2MaxBytes];
  sockaddr_storage dst = v4("198.51.100.7", 443);
  size_t n = write_proxy_v2("192.0.2.1", &dst, out);
  CHECK(n == 28);
  ProxyHeader h = parse_back(out, n);
  CHECK(h.version == ProxyVersion::kV2);
  CHECK(h.carries_address());
  CHECK(h.family == ProxyFamily::kInet);
  const uint8_t src[4] = {192, 0, 2, 1};
  const uint8_t d[4] = {198, 51, 100, 7};
  CHECK(std::memcmp(h.source.addr.data(), src, 4) == 0);
  CHECK(std::memcmp(h.destination.addr.data(), d, 4) == 0);
  CHECK(h.source.port == 0);
  CHECK(h.destination.port == 443);
}

TEST_CASE("an IPv6 client; a destination of another family is the unspecified address") {
  char out[kProxyV2MaxBytes];
  sockaddr_storage dst = v4("198.51.100.7", 443);
  size_t n = write_proxy_v2("2001:db8::5", &dst, out);
  CHECK(n == kProxyV2MaxBytes);
  ProxyHeader h = parse_back(out, n);
  CHECK(h.family == ProxyFamily::kInet6);
  CHECK(h.source.addr[0] == 0x20);
  CHECK(h.source.addr[15] == 5);
  CHECK(h.destination.port == 0);
  for (uint8_t b : h.destination.addr) CHECK(b == 0);
  CHECK(write_proxy_v2("2001:db8::5", nullptr, out) == kProxyV2MaxBytes);
}

TEST_CASE("a client address that is none gives a LOCAL header") {
  char out[kProxyV2MaxBytes];
  size_t n = write_proxy_v2("", nullptr, out);
  CHECK(n == 16);
  ProxyHeader h = parse_back(out, n);
  CHECK(h.command == ProxyCommand::kLocal);
  CHECK_FALSE(h.carries_address());
  CHECK(write_proxy_v2("not-an-address", nullptr, out) == 16);
}
