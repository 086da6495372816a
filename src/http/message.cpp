#include "rondel/http/message.h"

#include "header_rules.h"

namespace rondel::http {

bool iequals(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i];
    char y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

// Host is never treated as hop-by-hop even when a Connection header names it: stripping it would
// let a client send the backend a request without Host ("Connection: host" attack).
bool is_hop_by_hop(std::string_view name, std::span<const Header> all) noexcept {
  static constexpr std::string_view kFixed[] = {
      "Connection", "Keep-Alive", "Proxy-Connection", "TE", "Trailer", "Transfer-Encoding",
      "Upgrade"};
  for (std::string_view fixed : kFixed) {
    if (iequals(name, fixed)) return true;
  }
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
