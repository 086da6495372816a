// The table-driven character rules and iequals against their definitions, for every byte value
// at every position of strings of every short length (the checks look at overlapping groups of
// bytes, so each length and position is a separate case).
#include <doctest/doctest.h>

#include <string>
#include <string_view>

#include "header_rules.h"
#include "rondel/http/message.h"

using namespace rondel::http;

namespace {

bool is_alnum(unsigned char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

// RFC 9110 5.6.2.
bool ref_tchar(unsigned char c) {
  return is_alnum(c) || std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) !=
                            std::string_view::npos;
}

// RFC 9110 5.5: field-vchar, SP, HTAB, obs-text.
bool ref_value_char(unsigned char c) { return (c >= 0x20 && c != 0x7f) || c == '\t'; }

// unreserved, sub-delims except ',', and ':' '[' ']' '%'.
bool ref_host_char(unsigned char c) {
  return is_alnum(c) || std::string_view("-._~!$&'()*+;=:[]%").find(static_cast<char>(c)) !=
                            std::string_view::npos;
}

bool ref_iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("is_tchar matches RFC 9110 for every byte") {
  for (int c = 0; c < 256; ++c) {
    INFO("byte " << c);
    const auto b = static_cast<unsigned char>(c);
    CHECK(rules::is_tchar(b) == ref_tchar(b));
  }
}

TEST_CASE("name, value and host checks: every byte at every position of every short length") {
  CHECK_FALSE(rules::is_valid_field_name(""));
  CHECK(rules::is_valid_field_value(""));
  CHECK(rules::is_valid_host(""));
  for (size_t len = 1; len <= 40; ++len) {
    // The base string passes all three checks; one byte of it is then replaced.
    const std::string base(len, 'a');
    REQUIRE(rules::is_valid_field_name(base));
    REQUIRE(rules::is_valid_field_value(base));
    REQUIRE(rules::is_valid_host(base));
    for (size_t pos = 0; pos < len; ++pos) {
      for (int c = 0; c < 256; ++c) {
        std::string s = base;
        s[pos] = static_cast<char>(c);
        const auto b = static_cast<unsigned char>(c);
        INFO("length " << len << ", byte " << c << " at " << pos);
        CHECK(rules::is_valid_field_name(s) == ref_tchar(b));
        CHECK(rules::is_valid_field_value(s) == ref_value_char(b));
        CHECK(rules::is_valid_host(s) == ref_host_char(b));
      }
    }
  }
}

TEST_CASE("iequals: every pair of bytes, and lengths") {
  for (int x = 0; x < 256; ++x) {
    for (int y = 0; y < 256; ++y) {
      const char a[] = {'k', static_cast<char>(x), '-'};
      const char b[] = {'K', static_cast<char>(y), '-'};
      const std::string_view va(a, 3);
      const std::string_view vb(b, 3);
      INFO("bytes " << x << " and " << y);
      CHECK(iequals(va, vb) == ref_iequals(va, vb));
    }
  }
  CHECK(iequals("", ""));
  CHECK(iequals("Content-Length", "content-LENGTH"));
  CHECK_FALSE(iequals("Content-Length", "Content-Lengt"));
  // Bytes equal once bit 0x20 is set, but not letters.
  CHECK_FALSE(iequals("@[\\]^_", "`{|}~\x7f"));
  CHECK_FALSE(iequals(std::string_view("\0", 1), " "));
}
