// The ASCII helpers: folding only 'A'..'Z', classes by the ASCII table whatever the locale,
// trimming only SP and HTAB (iequals is checked byte by byte in tests/unit/http).
#include "rondel/util/ascii.h"

#include <doctest/doctest.h>

#include <string>

using namespace rondel::util;

TEST_CASE("to_lower folds A-Z and leaves every other byte") {
  for (int c = 0; c < 256; ++c) {
    const char ch = static_cast<char>(c);
    const char want = c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : ch;
    REQUIRE(to_lower(ch) == want);
  }
  CHECK(lowercase("Example.COM:443") == "example.com:443");
  CHECK(lowercase("\xC3\x89t\xC3\xA9") == "\xC3\x89t\xC3\xA9");  // UTF-8 bytes untouched
  std::string s = "Endpoint-Load-Metrics";
  lowercase_in_place(s);
  CHECK(s == "endpoint-load-metrics");
}

TEST_CASE("character classes are ASCII only") {
  int alpha = 0, digit = 0;
  for (int c = 0; c < 256; ++c) {
    const char ch = static_cast<char>(c);
    alpha += is_alpha(ch) ? 1 : 0;
    digit += is_digit(ch) ? 1 : 0;
    CHECK(is_alnum(ch) == (is_alpha(ch) || is_digit(ch)));
  }
  CHECK(alpha == 52);
  CHECK(digit == 10);
  CHECK_FALSE(is_alpha('\xE9'));
}

TEST_CASE("trim_ows and iequals") {
  CHECK(trim_ows(" \t a b \t ") == "a b");
  CHECK(trim_ows("\r\na\n") == "\r\na\n");  // CR and LF are not optional whitespace
  CHECK(trim_ows(" \t") == "");
  CHECK(iequals("Content-Length", "content-LENGTH"));
  CHECK_FALSE(iequals("a^", "A~"));
  CHECK_FALSE(iequals("abc", "abcd"));
  static_assert(iequals("TE", "te"));  // usable in constant expressions
}
