#include "header_rules.h"

#include <limits>

namespace rondel::http::rules {

bool is_tchar(unsigned char c) noexcept {
  if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
  switch (c) {
    case '!': case '#': case '$': case '%': case '&': case '\'': case '*': case '+': case '-':
    case '.': case '^': case '_': case '`': case '|': case '~':
      return true;
    default:
      return false;
  }
}

bool is_valid_field_name(std::string_view name) noexcept {
  if (name.empty()) return false;
  for (char c : name) {
    if (!is_tchar(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

bool is_valid_field_value(std::string_view value) noexcept {
  for (char ch : value) {
    auto c = static_cast<unsigned char>(ch);
    if ((c < 0x20 && c != '\t') || c == 0x7f) return false;
  }
  return true;
}

std::string_view trim_ows(std::string_view value) noexcept {
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
  return value;
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

bool is_valid_host(std::string_view value) noexcept {
  for (char ch : value) {
    auto c = static_cast<unsigned char>(ch);
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) continue;
    switch (c) {
      // unreserved, sub-delims except ',', and ':' '[' ']' '%' for ports, IP literals, pct-encoding
      case '-': case '.': case '_': case '~': case '!': case '$': case '&': case '\'': case '(':
      case ')': case '*': case '+': case ';': case '=': case ':': case '[': case ']': case '%':
        continue;
      default:
        return false;
    }
  }
  return true;
}

}  // namespace rondel::http::rules
