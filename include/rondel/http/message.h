// HTTP/1.1 message heads as rondel sees them after parsing and validation (RFC 9110, RFC 9112).
//
// Views in these structs point into the owning parser's head storage; they stay valid until that
// parser's next feed() after the message ends (reset), and must not be kept beyond it.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace rondel::http {

struct Header {
  std::string_view name;   // as received (case preserved)
  std::string_view value;  // leading/trailing whitespace trimmed
};

// How a message body is delimited on the wire.
enum class Framing : uint8_t {
  kNone,        // no body (GET without length, 204, 304, response to HEAD, 1xx)
  kLength,      // Content-Length: n
  kChunked,     // Transfer-Encoding: chunked
  kUntilClose,  // responses only: body runs until the backend closes
};

struct RequestHead {
  std::string_view method;   // "GET"
  int method_code = 0;       // llhttp_method_t value
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
  bool idempotent = false;          // GET, HEAD, OPTIONS, TRACE, PUT, DELETE (RFC 9110 9.2.2)
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

// Whether a field is hop-by-hop (RFC 9110 7.6.1): Connection, Keep-Alive, Proxy-Connection,
// TE, Trailer, Transfer-Encoding, Upgrade, or any field named in a Connection header of `all`.
// Content-Length is not hop-by-hop, but forwarders rewrite framing themselves.
bool is_hop_by_hop(std::string_view name, std::span<const Header> all) noexcept;

// Case-insensitive ASCII comparison of header names and tokens.
bool iequals(std::string_view a, std::string_view b) noexcept;

}  // namespace rondel::http
