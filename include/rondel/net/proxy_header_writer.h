// write_proxy_v2: the PROXY protocol v2 header rondel sends at the start of a backend connection
// (a pool's `send_proxy_protocol: v2`), as HAProxy's `send-proxy-v2` does.
//
// Specification: HAProxy's "The PROXY protocol, versions 1 & 2", section 2.2. rondel knows a
// client by its address only (the PROXY-derived one when its listener accepted a header), so
// the source port is 0. Pure; no allocation.
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <string_view>

namespace rondel::net {

// 16 bytes of fixed header + the IPv6 address block (2 x 16 + 2 x 2).
inline constexpr size_t kProxyV2MaxBytes = 16 + 36;

// Writes a PROXY command over TCP from `client_ip` (IPv4 or IPv6 text, port 0) to `dst` (the
// listener's address; nullptr or another family: the unspecified address and port 0) into
// `out`, returning its length. A `client_ip` that is no address gives a LOCAL header (16 bytes,
// AF_UNSPEC: the backend keeps the connection's own addresses).
size_t write_proxy_v2(std::string_view client_ip, const sockaddr_storage* dst,
                      char out[kProxyV2MaxBytes]) noexcept;

}  // namespace rondel::net
