// write_proxy_v2: the v2 binary header (signature, version/command, family/transport, length,
// addresses in network byte order).
#include "rondel/net/proxy_header_writer.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstdint>
#include <cstring>

namespace rondel::net {

namespace {

constexpr unsigned char kSignature[12] = {0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D,
                                          0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A};
constexpr unsigned char kV2Proxy = 0x21;  // version 2, PROXY
constexpr unsigned char kV2Local = 0x20;  // version 2, LOCAL
constexpr unsigned char kTcp4 = 0x11;
constexpr unsigned char kTcp6 = 0x21;

void put16(char* p, uint16_t v) noexcept {
  p[0] = static_cast<char>(v >> 8);
  p[1] = static_cast<char>(v & 0xff);
}

}  // namespace

size_t write_proxy_v2(std::string_view client_ip, const sockaddr_storage* dst,
                      char out[kProxyV2MaxBytes]) noexcept {
  std::memcpy(out, kSignature, sizeof kSignature);
  char ip[INET6_ADDRSTRLEN] = {};
  unsigned char src[16] = {};
  int af = 0;
  if (client_ip.size() < sizeof ip) {
    std::memcpy(ip, client_ip.data(), client_ip.size());
    if (inet_pton(AF_INET, ip, src) == 1) af = AF_INET;
    else if (inet_pton(AF_INET6, ip, src) == 1) af = AF_INET6;
  }
  if (af == 0) {
    out[12] = static_cast<char>(kV2Local);
    out[13] = 0;  // AF_UNSPEC
    put16(out + 14, 0);
    return 16;
  }
  out[12] = static_cast<char>(kV2Proxy);
  const bool v4 = af == AF_INET;
  const size_t alen = v4 ? 4 : 16;
  out[13] = static_cast<char>(v4 ? kTcp4 : kTcp6);
  put16(out + 14, static_cast<uint16_t>(2 * alen + 4));
  char* p = out + 16;
  std::memcpy(p, src, alen);
  std::memset(p + alen, 0, alen);  // the destination, unless known below
  uint16_t dport = 0;
  if (dst != nullptr && dst->ss_family == af) {
    if (v4) {
      const auto* s = reinterpret_cast<const sockaddr_in*>(dst);
      std::memcpy(p + alen, &s->sin_addr, 4);
      dport = ntohs(s->sin_port);
    } else {
      const auto* s = reinterpret_cast<const sockaddr_in6*>(dst);
      std::memcpy(p + alen, &s->sin6_addr, 16);
      dport = ntohs(s->sin6_port);
    }
  }
  put16(p + 2 * alen, 0);  // source port: rondel keeps none
  put16(p + 2 * alen + 2, dport);
  return 16 + 2 * alen + 4;
}

}  // namespace rondel::net
