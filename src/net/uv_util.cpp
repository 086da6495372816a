// libuv helpers: address conversion and counted handle closing.
#include "rondel/net/uv_util.h"

#include <arpa/inet.h>

#include <cstdio>
#include <cstring>

namespace rondel::net {

core::Result<sockaddr_storage> to_sockaddr(const std::string& host, uint16_t port) {
  sockaddr_storage ss{};
  if (uv_ip4_addr(host.c_str(), port, reinterpret_cast<sockaddr_in*>(&ss)) == 0) return ss;
  if (uv_ip6_addr(host.c_str(), port, reinterpret_cast<sockaddr_in6*>(&ss)) == 0) return ss;
  return core::fail("not an IP address: " + host);
}

std::string sockaddr_to_string(const sockaddr* sa) {
  char ip[INET6_ADDRSTRLEN] = "?";
  if (sa->sa_family == AF_INET) {
    uv_ip4_name(reinterpret_cast<const sockaddr_in*>(sa), ip, sizeof ip);
    return std::string(ip) + ":" + std::to_string(sockaddr_port(sa));
  }
  uv_ip6_name(reinterpret_cast<const sockaddr_in6*>(sa), ip, sizeof ip);
  return "[" + std::string(ip) + "]:" + std::to_string(sockaddr_port(sa));
}

uint16_t sockaddr_port(const sockaddr* sa) noexcept {
  if (sa->sa_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(sa)->sin_port);
  if (sa->sa_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(sa)->sin6_port);
  return 0;
}

bool PeerAddr::read(const uv_tcp_t* tcp) noexcept {
  sockaddr_storage ss{};
  int n = sizeof ss;
  family = 0;
  len = 0;
  if (uv_tcp_getpeername(tcp, reinterpret_cast<sockaddr*>(&ss), &n) != 0) return false;
  if (ss.ss_family == AF_INET) {
    if (uv_ip4_name(reinterpret_cast<const sockaddr_in*>(&ss), data, sizeof data) != 0) return false;
    len = static_cast<uint8_t>(strnlen(data, sizeof data));
    family = 4;
  } else if (ss.ss_family == AF_INET6) {
    std::memcpy(data, &reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_addr, 16);
    family = 6;
  }
  return family != 0;
}

bool PeerAddr::assign(int af, const void* bytes) noexcept {
  family = 0;
  len = 0;
  if (af == AF_INET) {
    if (inet_ntop(AF_INET, bytes, data, sizeof data) == nullptr) return false;
    len = static_cast<uint8_t>(strnlen(data, sizeof data));
    family = 4;
  } else if (af == AF_INET6) {
    std::memcpy(data, bytes, 16);
    family = 6;
  }
  return family != 0;
}

size_t PeerAddr::format(char* buf, size_t cap) const noexcept {
  if (cap == 0) return 0;
  buf[0] = '\0';
  if (family == 4) {
    size_t n = len < cap ? len : cap - 1;
    std::memcpy(buf, data, n);
    buf[n] = '\0';
    return n;
  }
  if (family != 6 || inet_ntop(AF_INET6, data, buf, static_cast<socklen_t>(cap)) == nullptr) {
    buf[0] = '\0';
    return 0;
  }
  return std::strlen(buf);
}

void HandleCloser::close_handle(uv_handle_t* h) noexcept {
  closing_ = true;
  if (uv_is_closing(h)) return;
  h->data = this;
  ++pending_;
  uv_close(h, &HandleCloser::on_close);
}

void HandleCloser::on_close(uv_handle_t* h) noexcept {
  auto* self = static_cast<HandleCloser*>(h->data);
  if (--self->pending_ == 0) self->on_all_closed();
}

}  // namespace rondel::net
