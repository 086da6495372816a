// A byte-level pre-check of a message head (or chunked trailer section) before llhttp sees it.
//
// llhttp 8.1 in strict mode still accepts a bare LF ending the head and obs-fold continuation
// lines; this scanner rejects both, any bare CR or control byte, and enforces the head-size and
// first-line limits before a byte is copied. It also finds the end of the head on its own, so the
// parser can check that llhttp agrees on where the head ends (a disagreement is a smuggling risk).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace rondel::http {

struct ScanResult {
  size_t used = 0;         // bytes of the input that belong to the head
  bool complete = false;   // the empty line ending the head was found (at used - 2)
  bool failed = false;
  uint16_t status = 400;   // when failed: 400, 414 or 431
  std::string_view reason;
};

class HeadScanner {
 public:
  // Starts a head: the first non-empty line may hold at most max_first_line bytes (414 beyond);
  // the whole head at most max_bytes (431 beyond). Empty lines before the first line are allowed.
  // With request_line, that first line must separate its parts by single spaces (RFC 9112 3: no
  // HTAB, no leading, trailing or repeated SP; llhttp 8.1 accepts "GET  / HTTP/1.1").
  void start_head(size_t max_first_line, size_t max_bytes, bool request_line = false) noexcept;
  // Starts a trailer section (after the last chunk): an empty first line ends it.
  void start_trailers(size_t max_bytes) noexcept;
  // Marks the scanner idle (body bytes are not scanned).
  void stop() noexcept { active_ = false; }

  bool active() const noexcept { return active_; }
  // Bytes scanned since the last start.
  size_t bytes() const noexcept { return bytes_; }

  // Scans data[0, len) and stops at the end of the head. Call only while active(); after a
  // complete or failed result the scanner becomes inactive. O(len), no allocation. Runs of
  // ordinary bytes inside a line are skipped a word at a time; the verdict, its offset and
  // status do not depend on that, nor on how the input is split across calls.
  ScanResult scan(const char* data, size_t len) noexcept;

 private:
  bool active_ = false;
  bool in_first_line_ = true;  // no non-empty line seen yet
  bool at_line_start_ = true;
  bool cr_pending_ = false;
  bool request_line_ = false;
  bool prev_space_ = false;  // the previous byte of the first line was SP
  size_t line_len_ = 0;
  size_t bytes_ = 0;
  size_t max_first_line_ = 0;
  size_t max_bytes_ = 0;
};

}  // namespace rondel::http
