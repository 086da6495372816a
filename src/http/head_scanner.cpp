#include "head_scanner.h"

#include <algorithm>
#include <bit>
#include <cstring>

namespace rondel::http {

namespace {

// Byte tests on eight bytes at a time in a uint64_t. Each marks the high bit of every byte that
// passes the test and sets no other bit, so the masks combine exactly and locate the first hit.
constexpr uint64_t kOnes = 0x0101010101010101u;
constexpr uint64_t kLow7 = 0x7f7f7f7f7f7f7f7fu;
constexpr uint64_t kHighBits = 0x8080808080808080u;

// Bytes below n (n <= 0x80). Adding 0x80 - n to the low 7 bits never carries into the next byte.
constexpr uint64_t bytes_below(uint64_t w, uint8_t n) noexcept {
  return ~(((w & kLow7) + kOnes * (0x80u - n)) | w) & kHighBits;
}

constexpr uint64_t bytes_equal(uint64_t w, uint8_t c) noexcept {
  return bytes_below(w ^ (kOnes * c), 1);
}

// Marks the bytes of the 8 at p that the byte-at-a-time step must see in the middle of a line:
// CR, LF, any other control byte but HTAB, and DEL; inside a request line also SP and HTAB (the
// single-space rule looks at each). Every other byte only lengthens the line.
uint64_t stop_bytes(const unsigned char* p, bool request_line) noexcept {
  uint64_t w;
  std::memcpy(&w, p, sizeof w);
  const uint64_t del = bytes_equal(w, 0x7f);
  if (request_line) return bytes_below(w, 0x21) | del;
  return (bytes_below(w, 0x20) & ~bytes_equal(w, '\t')) | del;
}

// Offset of the first byte, in memory order, that a non-zero stop_bytes() mask marks.
size_t first_marked(uint64_t mask) noexcept {
  if constexpr (std::endian::native == std::endian::little) {
    return static_cast<size_t>(std::countr_zero(mask)) / 8;
  } else {
    return static_cast<size_t>(std::countl_zero(mask)) / 8;
  }
}

}  // namespace

void HeadScanner::start_head(size_t max_first_line, size_t max_bytes, bool request_line) noexcept {
  *this = HeadScanner{};
  active_ = true;
  request_line_ = request_line;
  max_first_line_ = max_first_line;
  max_bytes_ = max_bytes;
}

void HeadScanner::start_trailers(size_t max_bytes) noexcept {
  *this = HeadScanner{};
  active_ = true;
  in_first_line_ = false;
  max_first_line_ = max_bytes;
  max_bytes_ = max_bytes;
}

ScanResult HeadScanner::scan(const char* data, size_t len) noexcept {
  ScanResult r;
  auto fail = [&](size_t i, uint16_t status, std::string_view reason) {
    active_ = false;
    r.used = i;
    r.failed = true;
    r.status = status;
    r.reason = reason;
    return r;
  };
  const auto* in = reinterpret_cast<const unsigned char*>(data);
  for (size_t i = 0; i < len; ++i) {
    if (!at_line_start_ && !cr_pending_) {
      // Fast path: skip whole words of ordinary bytes, but none past the byte that would break
      // a limit (the step below then rejects it, at the same offset and with the same status).
      // Bytes of a last partial word go through the step below.
      size_t end = i + std::min(len - i, max_bytes_ - bytes_);
      if (in_first_line_) end = std::min(end, i + (max_first_line_ - line_len_));
      const bool request_line = in_first_line_ && request_line_;
      size_t j = i;
      while (end - j >= 8) {
        const uint64_t stops = stop_bytes(in + j, request_line);
        if (stops != 0) {
          j += first_marked(stops);
          break;
        }
        j += 8;
      }
      if (j != i) {
        bytes_ += j - i;
        line_len_ += j - i;
        prev_space_ = false;  // no skipped byte of a request line is SP
        i = j;
        if (i == len) break;
      }
    }
    const unsigned char c = in[i];
    if (++bytes_ > max_bytes_) return fail(i, 431, "header_too_large");
    if (cr_pending_) {
      if (c != '\n') return fail(i, 400, "bare_cr");
      if (in_first_line_ && request_line_ && prev_space_) return fail(i, 400, "bad_request_line");
      cr_pending_ = false;
      if (line_len_ == 0 && !in_first_line_) {
        active_ = false;
        r.used = i + 1;
        r.complete = true;
        return r;
      }
      if (line_len_ != 0) in_first_line_ = false;
      line_len_ = 0;
      at_line_start_ = true;
      continue;
    }
    if (c == '\r') {
      cr_pending_ = true;
      continue;
    }
    if (c == '\n') return fail(i, 400, "bare_lf");
    if ((c < 0x20 && c != '\t') || c == 0x7f) return fail(i, 400, "invalid_header");
    if (at_line_start_ && !in_first_line_ && (c == ' ' || c == '\t')) {
      return fail(i, 400, "obs_fold");
    }
    if (in_first_line_ && request_line_) {
      const bool space = c == ' ';
      if (c == '\t' || (space && (prev_space_ || line_len_ == 0))) {
        return fail(i, 400, "bad_request_line");
      }
      prev_space_ = space;
    }
    at_line_start_ = false;
    ++line_len_;
    if (in_first_line_ && line_len_ > max_first_line_) return fail(i, 414, "uri_too_long");
  }
  r.used = len;
  return r;
}

}  // namespace rondel::http
