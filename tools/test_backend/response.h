// Response is one queued answer of a connection, and the functions that serialise it: the head,
// then the body in bounded pieces so a body of any size streams from a shared pattern buffer.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "options.h"

namespace rondel::test_backend {

enum class CacheResult : uint8_t { kNone, kHit, kMiss };

struct Response {
  uint64_t deadline_ms = 0;    // uv_now() from which it may be sent.
  uint64_t body_size = 0;      // Body bytes advertised (Content-Length) or sent chunked.
  uint64_t send_limit = 0;     // Body bytes actually sent (less than body_size for truncate-body).
  uint64_t body_sent = 0;      // Body bytes serialised so far.
  uint64_t body_offset = 0;    // Offset of the body in the object (a 206 range slice).
  uint64_t object_size = 0;    // 206 and 416: the whole object's size, for Content-Range.
  uint64_t request_bytes = 0;  // Request body bytes received, for X-Request-Bytes.
  uint32_t request_crc = 0;
  uint16_t status = 200;
  FailMode fail = FailMode::kNone;
  CacheResult cache = CacheResult::kNone;
  std::string_view method;      // Static string from llhttp_method_name.
  std::string_view content_type = "text/plain";
  bool has_crc = false;
  bool chunked = false;
  bool no_body = false;         // HEAD request, or a 204/304 status.
  bool keep_alive = true;
  bool http10 = false;          // Request was HTTP/1.0 (keep-alive must then be explicit).
  bool counted = false;         // Counted in Stats::in_flight until its head is serialised.
  bool started = false;         // Head serialised.
  bool use_text = false;        // Body is `text` rather than the backend's pattern.
  // --report-load: the form, the header of kPlain, the in-flight count to report, and a
  // verbatim value from ?load= (used instead of the count when non-empty).
  LoadReportForm report_form = LoadReportForm::kNone;
  std::string_view report_header;
  uint64_t report_in_flight = 0;
  std::string report_raw;
  std::string text;
};

// The reason phrase of a status code ("OK", "Not Found"...), or "Status" if unknown.
std::string_view reason_phrase(uint16_t status) noexcept;

// Appends the status line and headers of `r`. `fixed_headers` is the prebuilt
// "X-Backend: NAME\r\n" block. Allocation-free once `out` has capacity.
void append_head(std::string& out, const Response& r, std::string_view fixed_headers);

// Appends body pieces of `r` (chunk-framed if r.chunked) until the body is complete or `out`
// holds at least `high_water` bytes. `pattern` must hold at least `period` + kBodyPiece bytes
// where byte i of a pattern body is pattern[i % period]. Returns true when every byte up to
// send_limit has been serialised (the caller then ends a chunked body with append_last_chunk).
bool append_body(std::string& out, Response& r, std::string_view pattern, size_t period,
                 size_t high_water);

// Appends the terminating zero-length chunk of a chunked body.
void append_last_chunk(std::string& out);

// Largest body piece serialised at once (and one chunk's size).
inline constexpr size_t kBodyPiece = 64 * 1024;

// What extra-bytes sends after a valid response.
inline constexpr std::string_view kGarbage = "GARBAGE-AFTER-RESPONSE\r\n\r\n";

}  // namespace rondel::test_backend
