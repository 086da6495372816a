// Extracts the routing key of a request (uri, path, header, cookie, query parameter, source IP).
#pragma once

#include <cstdint>
#include <string_view>

#include "rondel/config/config.h"
#include "rondel/http/message.h"

namespace rondel::proxy {

// Sets `out` to the key bytes (a view into the request head or client_ip) and returns true, or
// returns false when the key is absent: no such header, cookie or query parameter, or an empty
// value (so that missing_key applies). Values are taken raw, without percent-decoding, like
// HAProxy's `balance uri` and nginx's $request_uri. The key does not depend on incidental form:
// uri, path and query read the target's origin form (origin_form), src an IPv4-mapped IPv6
// address as the IPv4 address (source_key). The first header with a non-empty value wins.
// O(size of the head); no allocation.
bool extract_key(const config::HashKey& key, const http::RequestHead& head,
                 std::string_view client_ip, std::string_view& out) noexcept;

// The origin form of a request target: an absolute-form "http://host:80/p?q" gives "/p?q", one
// without a path ("http://host") gives "/"; other forms are returned as they are. A view into
// `target` (or a static "/"). Limitation: "http://host?q" gives "?q", not "/?q" (no copy); its
// path key is "/" as for "/?q".
std::string_view origin_form(std::string_view target) noexcept;
// The source-address key of `client_ip`: "::ffff:a.b.c.d" (an IPv4 client on a dual-stack
// listener) gives "a.b.c.d", so it hashes as on an IPv4 listener; anything else is unchanged.
std::string_view source_key(std::string_view client_ip) noexcept;

// Range-chunk keys (pool `range_chunk`, docs/routing.md). The chunk index of a Range header
// value for chunks of `chunk_size` bytes (> 0): one byte range "bytes=a-b" or "bytes=a-" (unit
// case-insensitive, blanks around the range allowed, b >= a) sets chunk = a / chunk_size and
// returns true. A suffix range ("bytes=-n": its offset depends on the object's size), several
// ranges, another unit or a malformed value return false: the request hashes as without Range.
// A range crossing a chunk boundary is placed by the chunk of its first byte. No allocation.
bool range_chunk_index(std::string_view range, uint64_t chunk_size, uint64_t& chunk) noexcept;
// The chunk of `head` (its one Range header) under `chunk_size`, or false: no Range, more than
// one Range header, or a value range_chunk_index refuses.
bool request_chunk(const http::RequestHead& head, uint64_t chunk_size, uint64_t& chunk) noexcept;
// The placement hash of chunk `chunk` of the object whose key hashes to `key_hash`:
// core::mix64(key_hash, chunk), so every chunk, chunk 0 included, is placed independently of the
// whole object and of the other chunks.
uint64_t chunk_hash(uint64_t key_hash, uint64_t chunk) noexcept;

// The value of cookie `name` in a Cookie header value ("a=1; b=2"), or false.
bool find_cookie(std::string_view cookie_header, std::string_view name,
                 std::string_view& out) noexcept;
// The value of query parameter `name` in a request target ("/p?a=1&b=2"), or false.
bool find_query_param(std::string_view target, std::string_view name,
                      std::string_view& out) noexcept;

}  // namespace rondel::proxy
