// ASCII character classes, case folding and optional-whitespace trimming: the one copy every
// module uses. std only, no locale: header names, tokens, host names and config words are ASCII
// whatever the C locale says.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace rondel::util {

constexpr bool is_digit(char c) noexcept {
  return c >= '0' && c <= '9';
}
constexpr bool is_alpha(char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
constexpr bool is_alnum(char c) noexcept {
  return is_alpha(c) || is_digit(c);
}

// 'A'..'Z' to 'a'..'z'; every other byte as it is.
constexpr char to_lower(char c) noexcept {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

// Lowercases `s` in place (ASCII letters only).
inline void lowercase_in_place(std::string& s) noexcept {
  for (char& c : s) c = to_lower(c);
}

// A lowercased copy of `s` (allocates when longer than the small-string buffer).
inline std::string lowercase(std::string_view s) {
  std::string out(s);
  lowercase_in_place(out);
  return out;
}

// `s` without leading and trailing SP and HTAB (HTTP's optional whitespace, RFC 9110 5.6.3).
constexpr std::string_view trim_ows(std::string_view s) noexcept {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Case-insensitive ASCII equality: bytes equal, or the same letter in two cases. The data path
// compares every header name with it: inline, one compare per byte when the bytes are equal,
// no table. Bytes that differ only in bit 0x20 are equal only when both are letters ('^' and
// '~' differ in that bit too).
constexpr bool iequals(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const auto x = static_cast<unsigned char>(a[i]);
    const auto y = static_cast<unsigned char>(b[i]);
    if (x == y) continue;
    const auto lower = static_cast<unsigned char>(x | 0x20);
    if (lower != (y | 0x20) || lower < 'a' || lower > 'z') return false;
  }
  return true;
}

}  // namespace rondel::util
