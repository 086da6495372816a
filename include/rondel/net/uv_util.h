// Small helpers over libuv: addresses, peer names, and closing handles owned by heap objects.
//
// rondel's connection objects embed their libuv handles as members; such an object may only be
// freed once every embedded handle's close callback has run. HandleCloser counts those closes.
#pragma once

#include <uv.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "rondel/core/result.h"

namespace rondel::net {

// Converts an IP literal and port to a sockaddr. Fails for names (resolve them first).
core::Result<sockaddr_storage> to_sockaddr(const std::string& host, uint16_t port);
// Converts a sockaddr to "ip:port" ("[ip]:port" for IPv6).
std::string sockaddr_to_string(const sockaddr* sa);
// Port of a bound or connected socket address (host byte order).
uint16_t sockaddr_port(const sockaddr* sa) noexcept;
// Writes the peer's IP (no port) of a connected TCP handle into buf; returns its length.
size_t peer_ip(const uv_tcp_t* tcp, char* buf, size_t cap) noexcept;

// Owner of embedded handles: call close(h) for each open handle; when the last close callback
// has run, on_all_closed() is invoked (typically `delete this`). Loop thread only.
class HandleCloser {
 public:
  virtual ~HandleCloser() = default;
  // Closes `h` unless it is already closing; h->data must point to this object.
  void close_handle(uv_handle_t* h) noexcept;
  bool closing() const noexcept { return closing_; }

 protected:
  virtual void on_all_closed() noexcept = 0;
  bool closing_ = false;

 private:
  static void on_close(uv_handle_t* h) noexcept;
  int pending_ = 0;
};

}  // namespace rondel::net
