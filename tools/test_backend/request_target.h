// Parsing of a request target into the endpoint it names and the per-request behaviour overrides
// carried in its query (?delay=MS&size=N&status=CODE&chunked=1&fail=MODE&checksum=1).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "options.h"

namespace rondel::test_backend {

enum class Endpoint {
  kNormal,   // Any path that is not a control endpoint.
  kEcho,     // /_echo: the body is the raw request head.
  kStats,    // /_stats: counters as JSON (not counted as a request).
  kReset,    // /_reset: zero the counters and empty the cache model.
  kHealthz,  // /healthz: 200 "ok", or 503 while health is failed.
  kHealth,   // /_health?fail=0|1: set health.
};

// True for endpoints that are not counted as requests, not ledgered and never delayed or failed.
constexpr bool is_control(Endpoint e) noexcept {
  return e == Endpoint::kStats || e == Endpoint::kReset || e == Endpoint::kHealthz ||
         e == Endpoint::kHealth;
}

struct RequestTarget {
  Endpoint endpoint = Endpoint::kNormal;
  std::optional<uint64_t> delay_ms;
  std::optional<uint64_t> size;
  std::optional<uint16_t> status;
  std::optional<bool> chunked;
  std::optional<bool> checksum;
  std::optional<FailMode> fail;         // ?fail=MODE on ordinary paths.
  std::optional<bool> health_fail;      // ?fail=0|1 on /_health.
  std::string_view load;                // ?load=VALUE: sent verbatim as the --report-load value
  std::string_view error;               // Non-empty: a known parameter had a bad value.
};

// Parses an origin-form ("/p?q") or absolute-form ("http://h/p?q") target. Never allocates;
// the error is a static string.
RequestTarget parse_request_target(std::string_view target) noexcept;

}  // namespace rondel::test_backend
