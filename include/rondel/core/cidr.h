// Cidr: an IPv4 or IPv6 network (address/prefix), parsed from text and matched against
// addresses; header-only and std-only so the config loader and the transport share one rule.
#pragma once

#include <arpa/inet.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace rondel::core {

struct Cidr {
  uint8_t family = 0;  // 4 or 6
  uint8_t prefix = 0;  // bits: 0..32 (IPv4) or 0..128 (IPv6)
  std::array<uint8_t, 16> addr{};  // network bytes (IPv4: the first 4); host bits are zero

  // Parses "a.b.c.d/n", "x::y/n", or a bare address (a /32 or /128). Returns false and sets
  // `why` for anything else, including host bits set past the prefix ("10.0.0.1/8": write
  // 10.0.0.0/8), which is almost always a typo for another network.
  static bool parse(std::string_view text, Cidr& out, std::string& why) {
    std::string_view ip = text;
    int prefix = -1;
    if (auto slash = text.find('/'); slash != std::string_view::npos) {
      ip = text.substr(0, slash);
      std::string_view bits = text.substr(slash + 1);
      if (bits.empty() || bits.size() > 3) {
        why = "prefix length after '/' must be a number";
        return false;
      }
      prefix = 0;
      for (char c : bits) {
        if (c < '0' || c > '9') {
          why = "prefix length after '/' must be a number";
          return false;
        }
        prefix = prefix * 10 + (c - '0');
      }
    }
    char buf[64];
    if (ip.empty() || ip.size() >= sizeof buf) {
      why = "not an IP address";
      return false;
    }
    std::memcpy(buf, ip.data(), ip.size());
    buf[ip.size()] = '\0';
    Cidr c;
    if (inet_pton(AF_INET, buf, c.addr.data()) == 1) {
      c.family = 4;
    } else if (inet_pton(AF_INET6, buf, c.addr.data()) == 1) {
      c.family = 6;
    } else {
      why = "not an IP address";
      return false;
    }
    const int max = c.family == 4 ? 32 : 128;
    if (prefix < 0) prefix = max;
    if (prefix > max) {
      why = "prefix length " + std::to_string(prefix) + " is longer than " + std::to_string(max);
      return false;
    }
    c.prefix = static_cast<uint8_t>(prefix);
    if (!c.host_bits_zero()) {
      why = "address has bits set past the /" + std::to_string(prefix) + " prefix";
      return false;
    }
    out = c;
    return true;
  }

  // Whether the address (`family` 4 with 4 bytes, or 6 with 16) is in this network. An
  // IPv4-mapped IPv6 address (::ffff:a.b.c.d, a dual-stack socket's view of an IPv4 peer)
  // matches as the IPv4 address it maps. O(1).
  bool contains(uint8_t addr_family, const uint8_t* bytes) const noexcept {
    static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (addr_family == 6 && family == 4 && std::memcmp(bytes, kMapped, 12) == 0) {
      return contains(4, bytes + 12);
    }
    return addr_family == family && same_prefix(bytes);
  }

 private:
  // The mask of byte i under the prefix (0xFF inside it, 0 past it).
  uint8_t mask(size_t i) const noexcept {
    const int bit0 = static_cast<int>(i) * 8;
    const int in_prefix = prefix <= bit0 ? 0 : prefix >= bit0 + 8 ? 8 : prefix - bit0;
    return static_cast<uint8_t>(in_prefix == 0 ? 0 : 0xFF << (8 - in_prefix));
  }
  size_t size() const noexcept { return family == 4 ? 4 : 16; }
  // addr is a network: no bit set past the prefix.
  bool host_bits_zero() const noexcept {
    for (size_t i = 0; i < size(); ++i) {
      if ((addr[i] & static_cast<uint8_t>(~mask(i))) != 0) return false;
    }
    return true;
  }
  // `bytes` agree with addr over the prefix.
  bool same_prefix(const uint8_t* bytes) const noexcept {
    for (size_t i = 0; i < size(); ++i) {
      if ((bytes[i] & mask(i)) != (addr[i] & mask(i))) return false;
    }
    return true;
  }
};

}  // namespace rondel::core
