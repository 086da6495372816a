// Address: parsing "host:port" text and printing it back.

#include <arpa/inet.h>

#include <cstring>

#include "rondel/config/loader.h"
#include "rondel/util/ascii.h"
#include "scalars.h"

namespace rondel::config {
namespace {

constexpr size_t kMaxNameLength = 253;  // RFC 1035 section 2.3.4, without the trailing dot
constexpr size_t kMaxLabelLength = 63;

bool is_ipv4_literal(const std::string& host) noexcept {
  in_addr a{};
  return inet_pton(AF_INET, host.c_str(), &a) == 1;
}

// Parses an IPv6 literal and rewrites it in canonical form (RFC 5952: "0:0::1" -> "::1"), so
// that one address has one spelling and therefore one default backend id.
bool canonical_ipv6(std::string& host) {
  in6_addr a{};
  if (inet_pton(AF_INET6, host.c_str(), &a) != 1) return false;
  char text[INET6_ADDRSTRLEN];
  if (inet_ntop(AF_INET6, &a, text, sizeof text) == nullptr) return false;
  host = text;
  return true;
}

bool is_name_char(char c) noexcept {
  return util::is_alnum(c) || c == '-' || c == '_';
}

// A DNS host name: dot-separated labels of letters, digits, '-' and '_' (the underscore is
// not RFC 952 but Docker and many resolvers accept it), no label starting or ending with '-'.
bool is_host_name(std::string_view name) noexcept {
  if (name.empty() || name.size() > kMaxNameLength) return false;
  size_t label = 0;
  char last = '.';
  for (char c : name) {
    if (c == '.') {
      if (label == 0 || last == '-') return false;
      label = 0;
    } else {
      if (!is_name_char(c)) return false;
      if (label == 0 && c == '-') return false;
      if (++label > kMaxLabelLength) return false;
    }
    last = c;
  }
  return label > 0 && last != '-';
}

bool looks_numeric(std::string_view host) noexcept {
  for (char c : host) {
    if (c != '.' && (c < '0' || c > '9')) return false;
  }
  return true;
}

}  // namespace

std::string Address::to_string() const {
  const bool v6 = !is_name && host.find(':') != std::string::npos;
  std::string s;
  s.reserve(host.size() + 8);
  if (v6) s += '[';
  s += host;
  if (v6) s += ']';
  s += ':';
  s += std::to_string(port);
  return s;
}

const char* address_problem(std::string_view text, bool allow_name, Address& out) noexcept {
  try {
    if (text.empty()) return "it is empty";
    std::string_view host;
    std::string_view port_text;
    bool bracketed = false;
    if (text.front() == '[') {
      const size_t close = text.find(']');
      if (close == std::string_view::npos) return "'[' without a matching ']'";
      host = text.substr(1, close - 1);
      const std::string_view rest = text.substr(close + 1);
      if (rest.empty() || rest.front() != ':') return "a port is required, as in [::1]:80";
      port_text = rest.substr(1);
      bracketed = true;
    } else {
      const size_t colon = text.rfind(':');
      if (colon == std::string_view::npos) return "a port is required, as in 127.0.0.1:80";
      host = text.substr(0, colon);
      port_text = text.substr(colon + 1);
      if (host.find(':') != std::string_view::npos) {
        return "an IPv6 address must be in brackets, as in [::1]:80";
      }
    }
    if (host.empty()) return "the host is empty (use 0.0.0.0 or [::] for every address)";
    uint64_t port = 0;
    if (!parse_unsigned(port_text, port) || port > 65535) {
      return kPortOutOfRange;
    }
    std::string host_string(host);
    Address a;
    a.port = static_cast<uint16_t>(port);
    if (bracketed) {
      if (!canonical_ipv6(host_string)) return "not a valid IPv6 address inside [ ]";
    } else if (!is_ipv4_literal(host_string)) {
      if (looks_numeric(host)) return "not a valid IPv4 address";
      if (!is_host_name(host)) return "not a valid IP address or host name";
      if (!allow_name) return "an IP address is required here, not a host name";
      a.is_name = true;
    }
    a.host = std::move(host_string);
    out = std::move(a);
    return nullptr;
  } catch (...) {  // std::bad_alloc from the string copies
    return "out of memory";
  }
}

bool parse_address(std::string_view text, bool allow_name, Address& out) noexcept {
  return address_problem(text, allow_name, out) == nullptr;
}

}  // namespace rondel::config
