// Incremental, pull-style HTTP/1.1 parsers over llhttp (strict mode) with rondel's own guards.
//
// The caller feeds bytes as they arrive; feed() stops at the first event the caller must act on
// and reports how many bytes it consumed. Head bytes are copied into the parser's own storage (a
// buffer reused across messages, so no allocation in steady state); body bytes are never copied:
// a kBody event returns a view into the bytes just fed. The caller feeds the rest later.
// Single-threaded; one parser per connection side. Never throws.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "rondel/http/message.h"

namespace rondel::http {

struct Limits {
  size_t max_request_line = 8192;   // method + target + version; 414 beyond
  size_t max_header_bytes = 32768;  // the whole head; 431 beyond
  size_t max_headers = 100;         // field count; 431 beyond
  uint64_t max_body_bytes = 0;      // 413 beyond; 0 = unlimited
};

enum class Event : uint8_t {
  kNeedMore,    // all bytes consumed, feed more
  kHead,        // head complete: head() is valid until the message ends
  kBody,        // body bytes in Step::body (already de-chunked)
  kMessageEnd,  // message complete; the parser is ready for the next message after reset()
  kError,       // protocol error: error() says which; the connection must be closed
};

struct Step {
  Event event = Event::kNeedMore;
  size_t consumed = 0;    // bytes of the fed input used by this step
  std::string_view body;  // kBody only
};

// Why a message was rejected. status is what a client is answered with (400, 413, 414, 431,
// 501, 505); reason is a short machine-friendly word used in logs and metrics.
struct ParseError {
  uint16_t status = 400;
  std::string_view reason = "bad_request";
};

class RequestParser {
 public:
  explicit RequestParser(const Limits& limits);
  ~RequestParser();
  RequestParser(const RequestParser&) = delete;
  RequestParser& operator=(const RequestParser&) = delete;

  // Parses from data. Returns at the first event. After kHead/kBody feed the remaining bytes
  // (data + consumed) again. After kMessageEnd, call reset() before feeding the next request
  // (pipelined bytes stay with the caller). After kError nothing more may be fed.
  // Call feed again after kHead/kBody even when no bytes remain (len 0; data may be null): a
  // message can end without another byte (a GET ends right after its head, a Content-Length
  // body right after its last kBody), and feed keeps returning events until kNeedMore.
  // A kBody view points into data and is valid as long as the caller keeps those bytes.
  Step feed(const char* data, size_t len) noexcept;
  void reset() noexcept;

  const RequestHead& head() const noexcept;
  const ParseError& error() const noexcept;
  // Bytes of head received so far for the message being parsed (0 between messages): lets the
  // caller tell an idle keep-alive connection from one that is slowly sending a head.
  size_t head_bytes_pending() const noexcept;
  // As ResponseParser::body_left and skip_body, for the request body (an upload spliced to the
  // backend).
  uint64_t body_left() const noexcept;
  void skip_body(uint64_t n) noexcept;
  // As ResponseParser::last_chunk_seen, for a chunked request body.
  bool last_chunk_seen() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class ResponseParser {
 public:
  explicit ResponseParser(const Limits& limits);
  ~ResponseParser();
  ResponseParser(const ResponseParser&) = delete;
  ResponseParser& operator=(const ResponseParser&) = delete;

  // Must be called before each response is parsed, with whether the request was HEAD (then the
  // response has no body whatever its headers say). A 1xx response is reported as kHead then
  // kMessageEnd; the caller calls begin() again for the final response.
  void begin(bool request_was_head) noexcept;
  // Same contract as RequestParser::feed (including feeding 0 bytes after kHead/kBody). Every
  // error has status 502 (the backend misbehaved).
  Step feed(const char* data, size_t len) noexcept;
  // The backend closed the connection: completes a close-delimited body (returns kMessageEnd)
  // or reports a truncated message (kError).
  Step finish() noexcept;

  // Body bytes that follow in the input as they are: the rest of a Content-Length body, or the
  // rest of the current chunk's data of a chunked body (0 while a chunk-size line or the CRLF
  // after a chunk's data is due); 0 with no body yet, close-delimited, or ended. What a splice
  // path may move itself.
  uint64_t body_left() const noexcept;
  // Advances over `n` (<= body_left()) body bytes that went on without the parser seeing them
  // (spliced), as if they had been fed: no kBody event is left over for them; the next feed()
  // reports what follows (kMessageEnd when they ended a Content-Length body).
  void skip_body(uint64_t n) noexcept;
  // A chunked body's zero-size chunk was parsed (its trailer section or its end follows).
  bool last_chunk_seen() const noexcept;

  const ResponseHead& head() const noexcept;
  const ParseError& error() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rondel::http
