// BackendSocket: TCP, or TLS in client mode over it, to a backend's address.
#include "rondel/proxy/backend_socket.h"

#include <new>

#include "rondel/proxy/backend_state.h"

namespace rondel::proxy {

std::string BackendSocket::server_name(const BackendState& state, const BackendTarget& target) {
  std::string name(target.tls->server_name(target.host_name));
  if (!name.empty()) return name;
  // An address literal: its IP is what the certificate must name.
  char ip[64] = "";
  const auto* sa = reinterpret_cast<const sockaddr*>(&state.addr());
  if (sa->sa_family == AF_INET6) {
    uv_ip6_name(reinterpret_cast<const sockaddr_in6*>(sa), ip, sizeof ip);
  } else {
    uv_ip4_name(reinterpret_cast<const sockaddr_in*>(sa), ip, sizeof ip);
  }
  return ip;
}

int BackendSocket::connect(uv_loop_t* loop, const BackendState& state,
                           const BackendTarget& target, net::TransportEvents& events) noexcept {
  const auto* addr = reinterpret_cast<const sockaddr*>(&state.addr());
  sockaddr_storage other;
  if (target.port != 0) {
    other = state.addr();
    if (other.ss_family == AF_INET6) {
      reinterpret_cast<sockaddr_in6*>(&other)->sin6_port = htons(target.port);
    } else {
      reinterpret_cast<sockaddr_in*>(&other)->sin_port = htons(target.port);
    }
    addr = reinterpret_cast<const sockaddr*>(&other);
  }
  if (!target.tls) {
    started_ = true;
    return tcp_.connect(loop, addr, &events, target.proxy_header);
  }
  std::string name, key;
  try {
    name = server_name(state, target);
    key = state.id();
  } catch (...) {
    return UV_ENOMEM;  // never a handshake without the name to verify
  }
  tls_.reset(new (std::nothrow) tls::TlsTransport(target.tls, std::move(key), tcp_, events));
  if (!tls_) return UV_ENOMEM;
  started_ = true;
  return tls_->connect(loop, addr, target.proxy_header, name);
}

bool BackendSocket::close() noexcept {
  if (!started_) return false;
  if (tls_) tls_->close();
  else tcp_.close();
  return true;
}

}  // namespace rondel::proxy
