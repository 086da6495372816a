// Label values of /metrics that come from outside: request bytes made safe for Prometheus, and
// 64-bit hashes written as 16 hex digits (also /api/fleet's).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace rondel::server {

// A label value from request bytes: valid UTF-8 only (Prometheus rejects anything else: no
// overlong forms, no surrogates, nothing past U+10FFFF), control characters replaced by '?'.
std::string safe_label(std::string_view s);
// `v` as 16 lower-case hex digits.
std::string hash_hex16(uint64_t v);

}  // namespace rondel::server
