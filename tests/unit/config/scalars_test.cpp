// Tests of the scalar parsers an operator writes values with: durations, sizes, addresses.

#include <doctest/doctest.h>

#include <cstdint>
#include <string>

#include "rondel/config/loader.h"

namespace rondel::config {
namespace {

struct NumberCase {
  const char* text;
  bool ok;
  uint64_t value;
};

TEST_CASE("parse_duration_ms: units, bare milliseconds, rejects and overflow") {
  const NumberCase cases[] = {
      {"0", true, 0},
      {"500", true, 500},
      {"500ms", true, 500},
      {"2s", true, 2000},
      {"1m", true, 60000},
      {"1h", true, 3600000},
      {"0s", true, 0},
      {"18446744073709551615", true, UINT64_MAX},
      {"18446744073709551615ms", true, UINT64_MAX},
      {"18446744073709551616", false, 0},                    // one past 2^64-1
      {"18446744073709552s", false, 0},                      // overflows only once multiplied
      {"5124095576030h", true, 5124095576030ull * 3600000},  // largest whole hours
      {"5124095576031h", false, 0},
      {"", false, 0},
      {"s", false, 0},
      {"1.5s", false, 0},
      {"-1s", false, 0},
      {"+1s", false, 0},
      {"1 s", false, 0},
      {" 1s", false, 0},
      {"1S", false, 0},
      {"1d", false, 0},
      {"1m30s", false, 0},
      {"0x10", false, 0},
  };
  for (const NumberCase& c : cases) {
    const std::string text = c.text;
    CAPTURE(text);
    uint64_t v = 12345;
    CHECK(parse_duration_ms(c.text, v) == c.ok);
    CHECK(v == (c.ok ? c.value : 12345));  // untouched on failure
  }
}

TEST_CASE("parse_size_bytes: binary and decimal units, rejects and overflow") {
  const NumberCase cases[] = {
      {"0", true, 0},
      {"512", true, 512},
      {"512B", true, 512},
      {"64KiB", true, 65536},
      {"16MiB", true, 16ull << 20},
      {"1GiB", true, 1ull << 30},
      {"2TiB", true, 2ull << 40},
      {"10KB", true, 10000},
      {"1MB", true, 1000000},
      {"3GB", true, 3000000000ull},
      {"1TB", true, 1000000000000ull},
      {"16777215TiB", true, 16777215ull << 40},
      {"16777216TiB", false, 0},  // 2^64: one past the largest
      {"18446744073709551615", true, UINT64_MAX},
      {"18446744073709551616", false, 0},
      {"", false, 0},
      {"KiB", false, 0},
      {"64k", false, 0},
      {"64K", false, 0},
      {"64kib", false, 0},
      {"1.5MiB", false, 0},
      {"-1", false, 0},
      {"64 KiB", false, 0},
  };
  for (const NumberCase& c : cases) {
    const std::string text = c.text;
    CAPTURE(text);
    uint64_t v = 12345;
    CHECK(parse_size_bytes(c.text, v) == c.ok);
    CHECK(v == (c.ok ? c.value : 12345));
  }
}

struct AddressCase {
  const char* text;
  bool allow_name;
  bool ok;
  const char* host;
  uint16_t port;
  bool is_name;
  const char* printed;
};

TEST_CASE("parse_address: IPv4, bracketed IPv6, names only where allowed") {
  const AddressCase cases[] = {
      {"127.0.0.1:80", false, true, "127.0.0.1", 80, false, "127.0.0.1:80"},
      {"0.0.0.0:0", false, true, "0.0.0.0", 0, false, "0.0.0.0:0"},
      {"10.1.2.3:65535", false, true, "10.1.2.3", 65535, false, "10.1.2.3:65535"},
      {"[::1]:8080", false, true, "::1", 8080, false, "[::1]:8080"},
      {"[::]:80", false, true, "::", 80, false, "[::]:80"},
      {"[2001:DB8:0:0::1]:443", false, true, "2001:db8::1", 443, false, "[2001:db8::1]:443"},
      {"[::ffff:10.0.0.1]:80", false, true, "::ffff:10.0.0.1", 80, false, "[::ffff:10.0.0.1]:80"},
      {"cache.internal:80", true, true, "cache.internal", 80, true, "cache.internal:80"},
      {"localhost:9000", true, true, "localhost", 9000, true, "localhost:9000"},
      {"my-svc.ns.svc.cluster.local:8080", true, true, "my-svc.ns.svc.cluster.local", 8080, true,
       "my-svc.ns.svc.cluster.local:8080"},
      // Rejected.
      {"localhost:9000", false, false, "", 0, false, ""},
      {"127.0.0.1", false, false, "", 0, false, ""},
      {"127.0.0.1:", false, false, "", 0, false, ""},
      {"127.0.0.1:65536", false, false, "", 0, false, ""},
      {"127.0.0.1:99999999999999999999999", false, false, "", 0, false, ""},
      {"127.0.0.1:-1", false, false, "", 0, false, ""},
      {"127.0.0.1:+80", false, false, "", 0, false, ""},
      {"127.0.0.1:http", true, false, "", 0, false, ""},
      {":80", true, false, "", 0, false, ""},
      {"*:80", true, false, "", 0, false, ""},
      {"::1:80", true, false, "", 0, false, ""},
      {"[::1]", true, false, "", 0, false, ""},
      {"[::1:80", true, false, "", 0, false, ""},
      {"[127.0.0.1]:80", true, false, "", 0, false, ""},
      {"[::g]:80", true, false, "", 0, false, ""},
      {"256.0.0.1:80", true, false, "", 0, false, ""},
      {"1.2.3:80", true, false, "", 0, false, ""},
      {"-bad.example:80", true, false, "", 0, false, ""},
      {"bad-.example:80", true, false, "", 0, false, ""},
      {"a..b:80", true, false, "", 0, false, ""},
      {"sp ace:80", true, false, "", 0, false, ""},
      {"", true, false, "", 0, false, ""},
  };
  for (const AddressCase& c : cases) {
    const std::string text = c.text;
    CAPTURE(text);
    CAPTURE(c.allow_name);
    Address a;
    a.host = "untouched";
    REQUIRE(parse_address(c.text, c.allow_name, a) == c.ok);
    if (c.ok) {
      CHECK(a.host == c.host);
      CHECK(a.port == c.port);
      CHECK(a.is_name == c.is_name);
      CHECK(a.to_string() == c.printed);
    } else {
      CHECK(a.host == "untouched");
    }
  }
}

TEST_CASE("a name longer than DNS allows is refused") {
  const std::string label(64, 'a');
  Address a;
  CHECK_FALSE(parse_address(label + ".example:80", true, a));
  CHECK(parse_address(std::string(63, 'a') + ".example:80", true, a));
  std::string long_name;
  for (int i = 0; i < 64; ++i) long_name += "abc.";
  long_name += "x:80";  // 257 characters of name
  CHECK_FALSE(parse_address(long_name, true, a));
}

TEST_CASE("Address::to_string brackets IPv6 literals only") {
  CHECK(Address{"10.0.0.1", 80, false}.to_string() == "10.0.0.1:80");
  CHECK(Address{"fe80::1", 443, false}.to_string() == "[fe80::1]:443");
  CHECK(Address{"cache.example", 8080, true}.to_string() == "cache.example:8080");
}

}  // namespace
}  // namespace rondel::config
