// Request target parsing: endpoint by path, overrides by query parameter.
#include "request_target.h"

#include <charconv>

namespace rondel::test_backend {

namespace {

bool parse_query_u64(std::string_view text, uint64_t& out) noexcept {
  if (text.empty()) return false;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

std::optional<bool> parse_bool(std::string_view text) noexcept {
  if (text == "1" || text == "true" || text.empty()) return true;
  if (text == "0" || text == "false") return false;
  return std::nullopt;
}

Endpoint endpoint_of(std::string_view path) noexcept {
  if (path == "/_echo") return Endpoint::kEcho;
  if (path == "/_stats") return Endpoint::kStats;
  if (path == "/_reset") return Endpoint::kReset;
  if (path == "/healthz") return Endpoint::kHealthz;
  if (path == "/_health") return Endpoint::kHealth;
  return Endpoint::kNormal;
}

// Applies one "key=value" pair; returns an error message or empty.
std::string_view apply(RequestTarget& t, std::string_view key, std::string_view value) noexcept {
  uint64_t n = 0;
  if (key == "delay") {
    if (!parse_query_u64(value, n)) return "bad delay";
    t.delay_ms = n;
  } else if (key == "size") {
    if (!parse_query_u64(value, n)) return "bad size";
    t.size = n;
  } else if (key == "status") {
    if (!parse_query_u64(value, n) || n < 200 || n > 599) return "bad status (200-599)";
    t.status = static_cast<uint16_t>(n);
  } else if (key == "chunked") {
    t.chunked = parse_bool(value);
    if (!t.chunked) return "bad chunked";
  } else if (key == "checksum") {
    t.checksum = parse_bool(value);
    if (!t.checksum) return "bad checksum";
  } else if (key == "load") {
    t.load = value;
  } else if (key == "fail") {
    if (t.endpoint == Endpoint::kHealth) {
      t.health_fail = parse_bool(value);
      if (!t.health_fail) return "bad fail (0|1)";
    } else {
      t.fail = parse_fail_mode(value);
      if (!t.fail) return "bad fail mode";
    }
  }
  return {};
}

}  // namespace

RequestTarget parse_request_target(std::string_view target) noexcept {
  RequestTarget t;
  // Absolute form: skip "scheme://authority".
  if (size_t scheme = target.find("://"); scheme != std::string_view::npos && target[0] != '/') {
    size_t slash = target.find('/', scheme + 3);
    target = slash == std::string_view::npos ? std::string_view("/") : target.substr(slash);
  }
  size_t q = target.find('?');
  std::string_view path = target.substr(0, q);
  t.endpoint = endpoint_of(path);
  if (q == std::string_view::npos) return t;
  std::string_view query = target.substr(q + 1);
  if (size_t hash = query.find('#'); hash != std::string_view::npos) query = query.substr(0, hash);
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    size_t eq = pair.find('=');
    std::string_view key = pair.substr(0, eq);
    std::string_view value = eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1);
    if (std::string_view error = apply(t, key, value); !error.empty()) {
      t.error = error;
      return t;
    }
  }
  return t;
}

}  // namespace rondel::test_backend
