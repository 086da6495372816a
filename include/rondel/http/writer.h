// Serialises the heads rondel forwards and the short responses it answers with itself.
//
// Writers append to a caller-owned std::string (cleared by the caller, capacity reused, so no
// allocation in steady state). Hop-by-hop fields (Header::hop_by_hop, set by the parsers; a head
// built by hand goes through HopByHopMarker first) are dropped and framing is rewritten: a body is
// forwarded as Content-Length when its length is known, otherwise chunked (HTTP/1.1 peers) or
// close-delimited (HTTP/1.0 clients).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "rondel/http/message.h"

namespace rondel::http {

struct ForwardRequest {
  std::string_view client_ip;       // appended to X-Forwarded-For
  std::string_view proto = "http";  // X-Forwarded-Proto (replaces any value the client sent)
  // Host written when the client sent none (HTTP/1.0 allows that; the backend gets HTTP/1.1,
  // which requires it). Empty writes "Host: " with an empty value (RFC 9112 3.2).
  std::string_view default_host;
  // false: no X-Forwarded-For / X-Forwarded-Proto of rondel's; the client's pass unchanged.
  bool forwarded = true;
};

// Appends the request head to send to a backend: "METHOD target HTTP/1.1", every end-to-end
// field (Host kept), X-Forwarded-For (client's value + ", " + client_ip, or just client_ip),
// X-Forwarded-Proto, and framing: "Content-Length: n" for kLength, "Transfer-Encoding: chunked"
// for kChunked, nothing for kNone. Expect: 100-continue is dropped (rondel answers it itself).
// Several X-Forwarded-For lines from the client are merged, in order, into one line (a list
// split over lines means the same as one comma-joined line, RFC 9110 5.3); an XFF the client made
// hop-by-hop by naming it in Connection is dropped. No Connection field is written: the backend
// connection is HTTP/1.1 keep-alive. Cost: linear in the size of the head.
void write_request_head(const RequestHead& head, const ForwardRequest& fwd, std::string& out);

// How the response body is framed toward the client.
struct ClientFraming {
  Framing framing = Framing::kNone;
  bool close_after = false;  // rondel closes the client connection after this response
};

// Chooses the client-side framing for a response: kLength stays kLength; kChunked and
// kUntilClose become kChunked for an HTTP/1.1 client, kUntilClose (and close_after) for 1.0.
// close_after is also set when the client did not ask for keep-alive.
ClientFraming choose_client_framing(const RequestHead& req, const ResponseHead& resp) noexcept;

// Appends the response head for the client: "HTTP/1.1 status reason", end-to-end fields, the
// framing chosen above, and "Connection: close" or (HTTP/1.0 keep-alive) "Connection: keep-alive".
void write_response_head(const RequestHead& req, const ResponseHead& resp,
                         const ClientFraming& framing, std::string& out);

// Appends an interim 1xx response (e.g. "HTTP/1.1 100 Continue\r\n\r\n") with its end-to-end
// fields.
void write_interim_head(const ResponseHead& resp, std::string& out);

// Writes "<hex>\r\n" for a chunk of n bytes into buf (at least 18 bytes); returns its length.
size_t chunk_header(uint64_t n, char* buf) noexcept;
inline constexpr std::string_view kChunkTrailer = "\r\n";        // after each chunk's data
inline constexpr std::string_view kLastChunk = "0\r\n\r\n";       // ends a chunked body

// A complete short response rondel sends itself (400, 404, 405, 408, 413, 414, 431, 501, 502, 503,
// 504, 505): status line, Content-Type text/plain, Content-Length, Connection: close, and a
// one-line body naming the status. Returns a static string; never allocates. Any other status
// gets the 500 Internal Server Error response.
std::string_view canned_response(uint16_t status) noexcept;

}  // namespace rondel::http
