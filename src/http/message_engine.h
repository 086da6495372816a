// The llhttp driver shared by RequestParser and ResponseParser: runs llhttp in strict mode with
// pausing callbacks, copies the head into reusable storage, and applies rondel's framing and
// smuggling guards on top of llhttp's own checks.
//
// Single-threaded, never throws; the object must not move while in use (llhttp keeps a pointer
// to it), which is why the parsers hold it behind a unique_ptr.
#pragma once

#include <llhttp.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "head_scanner.h"
#include "rondel/http/message.h"
#include "rondel/http/parser.h"

namespace rondel::http {

class MessageEngine {
 public:
  MessageEngine(llhttp_type_t type, const Limits& limits);
  MessageEngine(const MessageEngine&) = delete;
  MessageEngine& operator=(const MessageEngine&) = delete;

  // Forgets the current message and prepares for the next one. skip_body (responses to HEAD)
  // makes the next message bodiless whatever its headers say.
  void reset(bool skip_body) noexcept;

  // See RequestParser::feed. len may be 0 (data may then be null): that runs the transitions
  // that need no input, e.g. the end of a bodiless message right after its head.
  Step feed(const char* data, size_t len) noexcept;

  // The peer closed its side (responses only): completes a close-delimited body.
  Step finish() noexcept;

  const RequestHead& request() const noexcept { return request_; }
  const ResponseHead& response() const noexcept { return response_; }
  const ParseError& error() const noexcept { return error_; }
  size_t head_bytes_pending() const noexcept;
  // Body bytes that follow as they are in the input: the rest of a Content-Length body, or the
  // rest of the current chunk's data of a chunked one (0 between chunks, in the chunk-size line
  // or its CRLF); 0 outside a body. llhttp counts both in content_length.
  uint64_t body_left() const noexcept {
    if (phase_ != Phase::kBody) return 0;
    const Framing f = is_request() ? request_.framing : response_.framing;
    if (f == Framing::kLength || (f == Framing::kChunked && in_chunk_data_)) {
      return parser_.content_length;
    }
    return 0;
  }
  // Advances over n <= body_left() body bytes that were never fed (see ResponseParser).
  void skip_body(uint64_t n) noexcept;
  // Chunked bodies: the zero-size chunk was parsed (the trailer section or the end follows).
  bool last_chunk_seen() const noexcept { return phase_ == Phase::kTrailers || phase_ == Phase::kEnded; }

 private:
  enum class Phase : uint8_t { kHead, kBody, kTrailers, kEnded, kFailed };
  enum class Pending : uint8_t { kNone, kHead, kBody, kLastChunk, kEnd };
  enum class FieldKind : uint8_t {
    kOther, kHost, kContentLength, kTransferEncoding, kUpgrade, kExpect
  };
  struct Piece {
    uint32_t off = 0;
    uint32_t len = 0;
  };
  struct Field {
    Piece name;
    Piece value;
    FieldKind kind = FieldKind::kOther;
  };

  static FieldKind classify_field(std::string_view name) noexcept;
  bool is_request() const noexcept { return type_ == HTTP_REQUEST; }
  std::string_view view(Piece p) const noexcept { return {storage_.data() + p.off, p.len}; }
  void append(Piece& piece, const char* at, size_t len);
  // Records a rejection. request_status applies to requests; responses always get 502.
  int reject(uint16_t request_status, std::string_view reason) noexcept;
  Step fail_step(size_t consumed) noexcept;
  void map_llhttp_error(llhttp_errno_t err) noexcept;

  // Reads request-method bytes from data[off, len) while method_pending_; see the definition.
  // Returns false on a rejection (error set, off at the offending byte).
  bool read_method(const char* data, size_t len, size_t& off) noexcept;
  int on_method_complete() noexcept;
  int on_version_complete() noexcept;
  int on_header_field(const char* at, size_t len) noexcept;
  int on_header_field_complete() noexcept;
  int on_header_value(const char* at, size_t len) noexcept;
  int on_header_value_complete() noexcept;
  int on_headers_complete() noexcept;
  int check_framing_agrees() noexcept;
  int finish_request_head() noexcept;
  int finish_response_head() noexcept;
  int on_body(const char* at, size_t len) noexcept;
  int on_chunk_header() noexcept;
  int on_chunk_extension(size_t len) noexcept;
  int on_chunk_complete() noexcept;
  int on_message_complete() noexcept;

  friend struct EngineCallbacks;

  llhttp_type_t type_;
  Limits limits_;
  llhttp_settings_t settings_{};
  llhttp_t parser_{};
  HeadScanner scanner_;

  Phase phase_ = Phase::kHead;
  Pending pending_ = Pending::kNone;
  bool method_pending_ = false;  // a request whose method rondel has not read to its end yet
  bool skip_body_ = false;
  bool error_set_ = false;
  bool field_open_ = false;
  bool seen_bytes_ = false;
  ParseError error_;

  std::string storage_;  // head bytes of the current message; capacity reused
  Piece method_;
  Piece target_;
  Piece reason_;
  std::vector<Field> fields_;
  std::vector<Header> headers_;
  HopByHopMarker hop_by_hop_;
  int host_index_ = -1;
  int content_length_index_ = -1;
  int transfer_encoding_index_ = -1;
  uint64_t content_length_ = 0;
  bool expect_continue_ = false;

  uint64_t body_bytes_ = 0;
  size_t chunk_extension_bytes_ = 0;
  bool in_chunk_data_ = false;  // between a chunk-size line and the CRLF after its data
  std::string_view body_;

  RequestHead request_;
  ResponseHead response_;
};

}  // namespace rondel::http
