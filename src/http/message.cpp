#include "rondel/http/message.h"

#include "header_rules.h"

namespace rondel::http {

bool iequals(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const auto x = static_cast<unsigned char>(a[i]);
    const auto y = static_cast<unsigned char>(b[i]);
    if (x == y) continue;
    // Bytes that differ only in bit 0x20 are the same letter in two cases if they are letters.
    const auto lower = static_cast<unsigned char>(x | 0x20);
    if (lower != (y | 0x20) || lower < 'a' || lower > 'z') return false;
  }
  return true;
}

namespace {

// The fixed hop-by-hop fields, told apart by length first: at most two compares per name.
bool is_fixed_hop_by_hop(std::string_view name) noexcept {
  switch (name.size()) {
    case 2: return iequals(name, "TE");
    case 7: return iequals(name, "Trailer") || iequals(name, "Upgrade");
    case 10: return iequals(name, "Connection") || iequals(name, "Keep-Alive");
    case 16: return iequals(name, "Proxy-Connection");
    case 17: return iequals(name, "Transfer-Encoding");
    default: return false;
  }
}

}  // namespace

// Host is never treated as hop-by-hop even when a Connection header names it: stripping it would
// let a client send the backend a request without Host ("Connection: host" attack).
bool is_hop_by_hop(std::string_view name, std::span<const Header> all) noexcept {
  if (is_fixed_hop_by_hop(name)) return true;
  if (iequals(name, "Host")) return false;
  bool named = false;
  for (const Header& h : all) {
    if (named) break;
    if (!iequals(h.name, "Connection")) continue;
    rules::for_each_list_token(h.value, [&](std::string_view token) {
      if (iequals(token, name)) named = true;
    });
  }
  return named;
}

}  // namespace rondel::http
