// The request rules that HTTP/1.1 and HTTP/2 share: the target's form, the one authority a
// request is routed and forwarded by, and which fields are hop-by-hop. Both codecs call these
// functions (src/http/message_engine.cpp for HTTP/1, src/proxy/http2_stream.cpp for HTTP/2), so
// a rule cannot hold for one protocol and not the other; docs/reliability.md lists them with the
// RFC section each follows.
//
// Pure functions over views: O(length of the head), no allocation, no exception.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "rondel/http/message.h"

namespace rondel::http {

// A rule's verdict: status 0 when the request passes, otherwise the status rondel answers
// (never forwarding the request) and a short reason for the log (a static string).
struct RuleVerdict {
  uint16_t status = 0;
  std::string_view reason;
  explicit operator bool() const noexcept { return status != 0; }
};

// Which forms a codec's target may take: HTTP/1's request-target may be absolute-form
// (RFC 9112 3.2.2); HTTP/2's :path carries origin-form or asterisk-form only, its scheme and
// authority having pseudo-fields of their own (RFC 9113 8.3.1).
enum class TargetForms : uint8_t { kHttp1, kHttp2 };

// The target rule (RFC 9112 3.2, RFC 9110 4.2.4, RFC 9113 8.3.1):
// - origin-form ("/..."); asterisk-form ("*") for OPTIONS only; absolute-form
//   ("scheme://authority/...") where `forms` allows it;
// - no fragment ('#': a client never sends one, RFC 9110 4.2.5);
// - no userinfo in an absolute-form's authority.
RuleVerdict check_target(std::string_view method, std::string_view target,
                         TargetForms forms) noexcept;

// The authority rule (RFC 9112 3.2.2 and 7.2, RFC 9113 8.3.1): the one authority a request is
// routed and forwarded by, and its Host.
// - An absolute-form target's authority wins: every Host field is replaced by it.
// - An HTTP/2 `:authority` (pseudo_authority, present when has_pseudo) is the authority; a
//   `host` field with another value makes the request malformed (400).
// - Otherwise the Host field, when there is one.
// The authority must be a valid host (is_valid_host), with no userinfo ('@'), and not be empty
// when it comes from the target or :authority. On success head.host is the authority and every
// Host field in `headers` says it (their values are pointed at it), so the head writer, hash
// keys and subset rules read one value. A second Host field is refused (400).
RuleVerdict resolve_authority(RequestHead& head, std::span<Header> headers,
                              std::string_view pseudo_authority, bool has_pseudo) noexcept;

// Content-Length as 1*DIGIT, with no sign, list or overflow of uint64_t (RFC 9110 8.6).
std::optional<uint64_t> parse_content_length(std::string_view value) noexcept;

// The authority of an absolute-form target ("http://a.example:8080/x" -> "a.example:8080"), or
// empty for any other form.
std::string_view target_authority(std::string_view target) noexcept;

}  // namespace rondel::http
