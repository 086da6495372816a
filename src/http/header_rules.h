// Character-level rules for header fields (RFC 9110 5.1, 5.5, 5.6.2, 8.6; RFC 9112 6.1, 7.1).
//
// Small pure functions shared by the parsers and writers. All are O(length), never allocate and
// never throw.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "rondel/util/ascii.h"

namespace rondel::http::rules {

// Whether c is a tchar (RFC 9110 5.6.2): the characters allowed in field names and tokens.
bool is_tchar(unsigned char c) noexcept;

// Whether name is a non-empty token.
bool is_valid_field_name(std::string_view name) noexcept;

// Whether value holds only field-vchar, SP, HTAB and obs-text (no NUL, no other control byte).
bool is_valid_field_value(std::string_view value) noexcept;

// value without leading and trailing SP/HTAB.
using util::trim_ows;

// Parses Content-Length as 1*DIGIT with no sign, no list and no overflow of uint64_t.
std::optional<uint64_t> parse_content_length(std::string_view value) noexcept;

// Whether value is a plausible Host (uri-host [":" port]): reg-name/IPv4/IP-literal characters
// only; in particular no whitespace, comma, slash, '@' or control byte. Empty is allowed (RFC 9112
// 3.2 permits an empty Host when the target has no authority).
bool is_valid_host(std::string_view value) noexcept;

// Whether an absolute-form request-target ("scheme://authority/...") has userinfo: an '@' in its
// authority. RFC 9110 4.2.4 makes that an error for http(s); HAProxy and nginx answer 400.
// Origin-form ("/a@b") and asterisk-form targets have no authority and never match.
bool target_has_userinfo(std::string_view target) noexcept;

// Calls fn(token) for each comma-separated element of a list value, trimmed, skipping empties.
template <class Fn>
void for_each_list_token(std::string_view value, Fn&& fn) {
  while (!value.empty()) {
    size_t comma = value.find(',');
    std::string_view token = trim_ows(value.substr(0, comma));
    if (!token.empty()) fn(token);
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
}

}  // namespace rondel::http::rules
