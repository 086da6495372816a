// Extracts the routing key of a request (uri, path, header, cookie, query parameter, source IP).
#pragma once

#include <string_view>

#include "rondel/config/config.h"
#include "rondel/http/message.h"

namespace rondel::proxy {

// Sets `out` to the key bytes (a view into the request head or client_ip) and returns true, or
// returns false when the key is absent (no such header, cookie or query parameter). Values are
// taken raw, without percent-decoding, like HAProxy's `balance uri` and nginx's $request_uri.
// O(size of the head); no allocation.
bool extract_key(const config::HashKey& key, const http::RequestHead& head,
                 std::string_view client_ip, std::string_view& out) noexcept;

// The value of cookie `name` in a Cookie header value ("a=1; b=2"), or false.
bool find_cookie(std::string_view cookie_header, std::string_view name,
                 std::string_view& out) noexcept;
// The value of query parameter `name` in a request target ("/p?a=1&b=2"), or false.
bool find_query_param(std::string_view target, std::string_view name,
                      std::string_view& out) noexcept;

}  // namespace rondel::proxy
