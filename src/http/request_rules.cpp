#include "rondel/http/request_rules.h"

#include "header_rules.h"

namespace rondel::http {

namespace {

constexpr RuleVerdict kPass{};

// The scheme of an absolute-form target ("http" of "http://..."), per RFC 3986 3.1; empty when
// the target has none.
std::string_view scheme_of(std::string_view target) noexcept {
  const size_t colon = target.find(':');
  if (colon == 0 || colon == std::string_view::npos || target.substr(colon + 1, 2) != "//") {
    return {};
  }
  for (size_t i = 0; i < colon; ++i) {
    const char c = target[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (!alpha && (i == 0 || !((c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.'))) {
      return {};
    }
  }
  return target.substr(0, colon);
}

bool is_host_field(std::string_view name) noexcept { return iequals(name, "host"); }

// An authority taken from the target or :authority: not empty, no userinfo, host characters.
RuleVerdict check_authority(std::string_view authority) noexcept {
  if (authority.find('@') != std::string_view::npos) return {400, "userinfo_in_authority"};
  if (authority.empty() || !rules::is_valid_host(authority)) return {400, "bad_authority"};
  return kPass;
}

}  // namespace

std::optional<uint64_t> parse_content_length(std::string_view value) noexcept {
  return rules::parse_content_length(value);
}

std::string_view target_authority(std::string_view target) noexcept {
  const std::string_view scheme = scheme_of(target);
  if (scheme.empty()) return {};
  std::string_view rest = target.substr(scheme.size() + 3);
  return rest.substr(0, rest.find_first_of("/?"));
}

RuleVerdict check_target(std::string_view method, std::string_view target,
                         TargetForms forms) noexcept {
  if (target.empty()) return {400, "bad_target"};
  if (target.find('#') != std::string_view::npos) return {400, "fragment_in_target"};
  if (target[0] == '/') return kPass;
  if (target == "*") return method == "OPTIONS" ? kPass : RuleVerdict{400, "bad_target"};
  if (forms == TargetForms::kHttp1 && !scheme_of(target).empty()) {
    if (rules::target_has_userinfo(target)) return {400, "userinfo_in_target"};
    return kPass;
  }
  return {400, "bad_target"};
}

RuleVerdict resolve_authority(RequestHead& head, std::span<Header> headers,
                              std::string_view pseudo_authority, bool has_pseudo) noexcept {
  Header* host_field = nullptr;
  for (Header& h : headers) {
    if (!is_host_field(h.name)) continue;
    if (host_field != nullptr) return {400, "duplicate_host"};
    host_field = &h;
  }
  std::string_view authority = target_authority(head.target);
  const bool from_target = !authority.empty() || !scheme_of(head.target).empty();
  if (has_pseudo) {
    authority = pseudo_authority;
    // RFC 9113 8.3.1: a host field that differs from :authority makes the request malformed.
    if (host_field != nullptr && !iequals(host_field->value, authority)) {
      return {400, "host_authority_mismatch"};
    }
  }
  if (from_target || has_pseudo) {
    if (RuleVerdict v = check_authority(authority)) return v;
    if (host_field != nullptr) host_field->value = authority;  // RFC 9112 3.2.2: replaced
  } else if (host_field != nullptr) {
    authority = host_field->value;
    if (!rules::is_valid_host(authority)) return {400, "bad_host"};  // '@' included
  }
  head.host = authority;
  return kPass;
}

}  // namespace rondel::http
