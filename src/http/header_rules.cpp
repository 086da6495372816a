#include "header_rules.h"

#include <array>
#include <limits>

#include "rondel/util/ascii.h"

namespace rondel::http::rules {

namespace {

// Character classes, one bit each, looked up per byte instead of comparing each byte against a
// list of ranges and characters.
constexpr uint8_t kTchar = 1;       // RFC 9110 5.6.2 tchar
constexpr uint8_t kValueChar = 2;   // field-vchar, SP, HTAB, obs-text (RFC 9110 5.5)
constexpr uint8_t kHostChar = 4;    // see is_valid_host

constexpr std::array<uint8_t, 256> kCharClass = [] {
  std::array<uint8_t, 256> t{};
  auto add = [&t](std::string_view chars, uint8_t bit) {
    for (char c : chars) t[static_cast<unsigned char>(c)] |= bit;
  };
  for (size_t c = 0; c < t.size(); ++c) {
    if (util::is_alnum(static_cast<char>(c))) t[c] |= kTchar | kHostChar;
    if ((c >= 0x20 && c != 0x7f) || c == '\t') t[c] |= kValueChar;
  }
  add("!#$%&'*+-.^_`|~", kTchar);
  // unreserved, sub-delims except ',', and ':' '[' ']' '%' for ports, IP literals, pct-encoding
  add("-._~!$&'()*+;=:[]%", kHostChar);
  return t;
}();

// Whether every byte of s has the class bit. Names and values are short, and a loop that ends at
// a different byte each time costs more than the lookups, so this looks at overlapping groups of
// 8 or 4 bytes without a branch per byte.
bool all_in_class(std::string_view s, uint8_t bit) noexcept {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  auto four = [p](size_t i) {
    return kCharClass[p[i]] & kCharClass[p[i + 1]] & kCharClass[p[i + 2]] & kCharClass[p[i + 3]];
  };
  uint8_t all = bit;
  if (n >= 8) {
    for (size_t i = 0; i + 8 < n; i += 8) all &= four(i) & four(i + 4);
    all &= four(n - 8) & four(n - 4);
  } else if (n >= 4) {
    all &= four(0) & four(n - 4);
  } else if (n != 0) {
    all &= kCharClass[p[0]] & kCharClass[p[n / 2]] & kCharClass[p[n - 1]];
  }
  return all != 0;
}

}  // namespace

bool is_tchar(unsigned char c) noexcept { return (kCharClass[c] & kTchar) != 0; }

bool is_valid_field_name(std::string_view name) noexcept {
  return !name.empty() && all_in_class(name, kTchar);
}

bool is_valid_field_value(std::string_view value) noexcept {
  return all_in_class(value, kValueChar);
}

std::optional<uint64_t> parse_content_length(std::string_view value) noexcept {
  if (value.empty()) return std::nullopt;
  uint64_t n = 0;
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  for (char c : value) {
    if (c < '0' || c > '9') return std::nullopt;
    auto digit = static_cast<uint64_t>(c - '0');
    if (n > (kMax - digit) / 10) return std::nullopt;
    n = n * 10 + digit;
  }
  return n;
}

bool is_valid_host(std::string_view value) noexcept { return all_in_class(value, kHostChar); }

bool target_has_userinfo(std::string_view target) noexcept {
  const size_t colon = target.find_first_of(":/?");
  if (colon == std::string_view::npos || target[colon] != ':' ||
      target.substr(colon + 1, 2) != "//") {
    return false;
  }
  std::string_view authority = target.substr(colon + 3);
  authority = authority.substr(0, authority.find_first_of("/?"));
  return authority.find('@') != std::string_view::npos;
}

}  // namespace rondel::http::rules
