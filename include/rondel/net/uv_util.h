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
// A peer's IP address in 18 bytes (an idle connection keeps this, not a 46-byte text). An IPv4
// address is kept as text ("255.255.255.255" fits), formatted once per connection; an IPv6
// address as its 16 bytes, formatted when asked.
struct PeerAddr {
  uint8_t family = 0;  // 0: unknown, 4 or 6
  uint8_t len = 0;     // IPv4: length of the text in data
  char data[16] = {};
  // Reads the peer address of `tcp`; false (family 0) if it has none.
  bool read(const uv_tcp_t* tcp) noexcept;
  // Sets the address from network-order bytes: `af` AF_INET (4 bytes) or AF_INET6 (16); false
  // (family 0) for another family. For an address learnt otherwise (a PROXY header).
  bool assign(int af, const void* bytes) noexcept;
  // The IPv4 text (empty for IPv6 or unknown).
  std::string_view ipv4() const noexcept { return {data, family == 4 ? len : size_t{0}}; }
  // Writes the address as text, without port, to buf (46 bytes hold any); returns its length
  // (0 when unknown).
  size_t format(char* buf, size_t cap) const noexcept;
};

// Owner of embedded handles: call close(h) for each open handle; when the last close callback
// has run, on_all_closed() is invoked (typically `delete this`). Loop thread only.
class HandleCloser {
 public:
  virtual ~HandleCloser() = default;
  // Closes `h` unless it is already closing; h->data must point to this object.
  void close_handle(uv_handle_t* h) noexcept;
  bool closing() const noexcept { return closing_; }

 protected:
  // Counts a close that is not a handle's own (a Transport's): call close_other() before
  // closing it and other_closed() from its on_transport_closed.
  void close_other() noexcept {
    closing_ = true;
    ++pending_;
  }
  void other_closed() noexcept {
    if (--pending_ == 0) on_all_closed();
  }
  virtual void on_all_closed() noexcept = 0;
  bool closing_ = false;

 private:
  static void on_close(uv_handle_t* h) noexcept;
  int pending_ = 0;
};

}  // namespace rondel::net
