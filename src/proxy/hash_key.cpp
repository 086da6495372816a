// Routing-key extraction from a parsed request head.
#include "rondel/proxy/hash_key.h"

#include <charconv>

#include "rondel/core/hash.h"
#include "rondel/util/ascii.h"

namespace rondel::proxy {

namespace {

using util::trim_ows;

bool is_scheme_char(char c) noexcept {
  return util::is_alnum(c) || c == '+' || c == '-' || c == '.';
}

}  // namespace

std::string_view origin_form(std::string_view target) noexcept {
  if (target.empty() || target.front() == '/' || target == "*") return target;
  // absolute-form: scheme "://" authority [path-abempty] ["?" query] (RFC 9112 3.2.2).
  size_t colon = target.find("://");
  if (colon == std::string_view::npos || colon == 0) return target;
  for (size_t i = 0; i < colon; ++i) {
    if (!is_scheme_char(target[i])) return target;
  }
  std::string_view rest = target.substr(colon + 3);
  size_t path = rest.find_first_of("/?");
  if (path == std::string_view::npos) return "/";
  return rest.substr(path);
}

std::string_view source_key(std::string_view client_ip) noexcept {
  constexpr std::string_view kMapped = "::ffff:";
  if (client_ip.size() > kMapped.size() && http::iequals(client_ip.substr(0, kMapped.size()), kMapped) &&
      client_ip.find('.', kMapped.size()) != std::string_view::npos) {
    return client_ip.substr(kMapped.size());
  }
  return client_ip;
}

bool range_chunk_index(std::string_view range, uint64_t chunk_size, uint64_t& chunk) noexcept {
  range = trim_ows(range);
  const size_t eq = range.find('=');
  if (eq == std::string_view::npos || chunk_size == 0 ||
      !http::iequals(trim_ows(range.substr(0, eq)), "bytes")) {
    return false;
  }
  const std::string_view spec = trim_ows(range.substr(eq + 1));
  const size_t dash = spec.find('-');
  if (dash == std::string_view::npos || dash == 0) return false;  // none, or a suffix range
  uint64_t first = 0;
  const char* end = spec.data() + dash;
  auto [p, ec] = std::from_chars(spec.data(), end, first);
  if (ec != std::errc{} || p != end) return false;
  const std::string_view last = spec.substr(dash + 1);
  if (!last.empty()) {
    uint64_t b = 0;
    auto [q, ec2] = std::from_chars(last.data(), last.data() + last.size(), b);
    if (ec2 != std::errc{} || q != last.data() + last.size() || b < first) return false;
  }
  chunk = first / chunk_size;
  return true;
}

bool request_chunk(const http::RequestHead& head, uint64_t chunk_size, uint64_t& chunk) noexcept {
  const http::Header* range = nullptr;
  for (const auto& h : head.headers) {
    if (!http::iequals(h.name, "range")) continue;
    if (range != nullptr) return false;  // two Range fields: not one single range
    range = &h;
  }
  return range != nullptr && range_chunk_index(range->value, chunk_size, chunk);
}

uint64_t chunk_hash(uint64_t key_hash, uint64_t chunk) noexcept {
  return core::mix64(key_hash, chunk);
}

bool find_cookie(std::string_view header, std::string_view name, std::string_view& out) noexcept {
  while (!header.empty()) {
    size_t semi = header.find(';');
    std::string_view pair = trim_ows(header.substr(0, semi));
    size_t eq = pair.find('=');
    if (eq != std::string_view::npos && trim_ows(pair.substr(0, eq)) == name) {
      out = trim_ows(pair.substr(eq + 1));
      if (out.size() >= 2 && out.front() == '"' && out.back() == '"') out = out.substr(1, out.size() - 2);
      return true;
    }
    if (semi == std::string_view::npos) break;
    header.remove_prefix(semi + 1);
  }
  return false;
}

bool find_query_param(std::string_view target, std::string_view name,
                      std::string_view& out) noexcept {
  size_t q = target.find('?');
  if (q == std::string_view::npos) return false;
  std::string_view query = target.substr(q + 1);
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    size_t eq = pair.find('=');
    std::string_view k = pair.substr(0, eq);
    if (k == name) {
      out = eq == std::string_view::npos ? std::string_view{} : pair.substr(eq + 1);
      return true;
    }
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return false;
}

bool extract_key(const config::HashKey& key, const http::RequestHead& head,
                 std::string_view client_ip, std::string_view& out) noexcept {
  const std::string_view target = origin_form(head.target);
  switch (key.kind) {
    case config::HashKeyKind::kUri:
      out = target;
      return true;
    case config::HashKeyKind::kPath:
      out = target.substr(0, target.find('?'));
      if (out.empty()) out = "/";  // "http://host?q": an empty path is "/" (RFC 9110 4.2.3)
      return true;
    case config::HashKeyKind::kSrc:
      out = source_key(client_ip);
      return !out.empty();
    case config::HashKeyKind::kHeader:
      for (const auto& h : head.headers) {
        if (!h.value.empty() && http::iequals(h.name, key.name)) {
          out = h.value;
          return true;
        }
      }
      return false;
    case config::HashKeyKind::kCookie:
      for (const auto& h : head.headers) {
        if (http::iequals(h.name, "cookie") && find_cookie(h.value, key.name, out) &&
            !out.empty()) {
          return true;
        }
      }
      return false;
    case config::HashKeyKind::kQuery:
      return find_query_param(target, key.name, out) && !out.empty();
    case config::HashKeyKind::kLlmPrefix:
      return false;  // a body key: read by the Exchange (body_key.h), never from the head
  }
  return false;
}

}  // namespace rondel::proxy
