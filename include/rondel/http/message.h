// HTTP/1.1 message heads as rondel sees them after parsing and validation (RFC 9110, RFC 9112).
//
// Views in these structs point into the owning parser's head storage; they stay valid until that
// parser's next feed() after the message ends (reset), and must not be kept beyond it.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "rondel/util/ascii.h"

namespace rondel::http {

struct Header {
  std::string_view name;   // as received (case preserved)
  std::string_view value;  // leading/trailing whitespace trimmed
  // Hop-by-hop (RFC 9110 7.6.1), so never forwarded: set by HopByHopMarker, which the parsers
  // run on every head they report.
  bool hop_by_hop = false;
};

// How a message body is delimited on the wire.
enum class Framing : uint8_t {
  kNone,        // no body (GET without length, 204, 304, response to HEAD, 1xx)
  kLength,      // Content-Length: n
  kChunked,     // Transfer-Encoding: chunked
  kUntilClose,  // responses only: body runs until the backend closes
};

struct RequestHead {
  std::string_view method;   // any token (RFC 9110 9.1, case-sensitive): "GET", "BAN", "QUERY"
  std::string_view target;   // request-target as received: "/a?b=c"
  uint8_t version_major = 1;
  uint8_t version_minor = 1;
  std::span<const Header> headers;  // every field in order, hop-by-hop ones included
  std::string_view host;            // the single Host value (validated present for HTTP/1.1)
  Framing framing = Framing::kNone;
  uint64_t content_length = 0;      // when framing == kLength
  bool keep_alive = true;           // client wants the connection kept after this exchange
  bool expect_continue = false;     // "Expect: 100-continue"
  bool is_head = false;             // method HEAD: the response has no body
  bool idempotent = false;          // GET, HEAD, OPTIONS, TRACE, PUT, DELETE (RFC 9110 9.2.2);
                                    // any other method, known or not, is not
};

struct ResponseHead {
  uint16_t status = 0;
  std::string_view reason;
  uint8_t version_major = 1;
  uint8_t version_minor = 1;
  std::span<const Header> headers;
  Framing framing = Framing::kNone;
  uint64_t content_length = 0;
  bool keep_alive = true;  // backend allows reuse of the connection after this response
};

// Marks the hop-by-hop fields of a head (RFC 9110 7.6.1): Connection, Keep-Alive,
// Proxy-Connection, TE, Trailer, Transfer-Encoding, Upgrade, and every field that a Connection
// field of the same head names, except Host (stripping it would let a client send the backend a
// request without Host). Content-Length is not hop-by-hop, but forwarders rewrite framing
// themselves.
//
// Cost: linear in the bytes of the head. A few Connection tokens (the usual "keep-alive" or
// "close") are looked for directly; more go through a hash table of the field names built once
// per head, with a per-process seed so that a client cannot choose names that collide. Tables are
// kept between heads: no allocation once a head with as many fields has been seen. One marker per
// parser; not thread-safe.
class HopByHopMarker {
 public:
  // Sets Header::hop_by_hop on every field of headers (clearing it where it does not apply).
  void mark(std::span<Header> headers);

 private:
  void build_table(std::span<const Header> headers);
  void mark_named(std::span<Header> headers, std::string_view token) noexcept;

  std::vector<uint32_t> slots_;      // open addressing: 1 + index of a name's first field, 0 empty
  std::vector<uint64_t> hashes_;     // per field: the seeded hash of its name
  std::vector<uint32_t> next_same_;  // per field: 1 + index of the next field of that name, or 0
  uint64_t slot_mask_ = 0;
};

// Case-insensitive ASCII comparison of header names and tokens (inline, util/ascii.h).
using util::iequals;

}  // namespace rondel::http
