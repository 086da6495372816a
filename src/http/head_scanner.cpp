#include "head_scanner.h"

namespace rondel::http {

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
  for (size_t i = 0; i < len; ++i) {
    auto c = static_cast<unsigned char>(data[i]);
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
