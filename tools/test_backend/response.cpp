// Response serialisation: status line, headers, body pieces.
#include "response.h"

#include <algorithm>
#include <charconv>

namespace rondel::test_backend {

namespace {

void append_number(std::string& out, uint64_t n, int base = 10) {
  char digits[24];
  auto end = std::to_chars(digits, digits + sizeof digits, n, base).ptr;
  out.append(digits, end);
}

}  // namespace

std::string_view reason_phrase(uint16_t status) noexcept {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 206: return "Partial Content";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 304: return "Not Modified";
    case 307: return "Temporary Redirect";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 413: return "Content Too Large";
    case 416: return "Range Not Satisfiable";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return "Status";
  }
}

// The --report-load field of `r`, if any.
void append_load_report(std::string& out, const Response& r) {
  if (r.report_form == LoadReportForm::kNone) return;
  if (r.report_form == LoadReportForm::kPlain) {
    out.append(r.report_header);
    out.append(": ");
  } else {
    out.append("endpoint-load-metrics: ");
  }
  if (!r.report_raw.empty()) {
    out.append(r.report_raw);
    out.append("\r\n");
    return;
  }
  switch (r.report_form) {
    case LoadReportForm::kText: out.append("TEXT named_metrics.in_flight="); break;
    case LoadReportForm::kColon: out.append("named_metrics.in_flight:"); break;
    case LoadReportForm::kJson: out.append("JSON {\"named_metrics\": {\"in_flight\": "); break;
    default: break;
  }
  append_number(out, r.report_in_flight);
  if (r.report_form == LoadReportForm::kJson) out.append("}}");
  out.append("\r\n");
}

void append_head(std::string& out, const Response& r, std::string_view fixed_headers) {
  out.append("HTTP/1.1 ");
  append_number(out, r.status);
  out.push_back(' ');
  out.append(reason_phrase(r.status));
  out.append("\r\n");
  out.append(fixed_headers);
  out.append("X-Request-Bytes: ");
  append_number(out, r.request_bytes);
  out.append("\r\nX-Seen-Method: ");
  out.append(r.method);
  out.append("\r\n");
  append_load_report(out, r);
  if (r.cache != CacheResult::kNone) {
    out.append(r.cache == CacheResult::kHit ? "X-Cache: HIT\r\n" : "X-Cache: MISS\r\n");
  }
  if (r.has_crc) {
    char hex[9];
    constexpr char kHex[] = "0123456789abcdef";
    for (int i = 0; i < 8; ++i) hex[i] = kHex[(r.request_crc >> (28 - 4 * i)) & 0xF];
    out.append("X-Request-Crc32: ");
    out.append(hex, 8);
    out.append("\r\n");
  }
  if (r.status == 206 || r.status == 416) {
    out.append("Content-Range: bytes ");
    if (r.status == 206) {
      append_number(out, r.body_offset);
      out.push_back('-');
      append_number(out, r.body_offset + r.body_size - 1);
    } else {
      out.push_back('*');
    }
    out.push_back('/');
    append_number(out, r.object_size);
    out.append("\r\n");
  }
  bool bodiless_status = r.status == 204 || r.status == 304;
  if (!bodiless_status) {
    out.append("Content-Type: ");
    out.append(r.content_type);
    out.append("\r\n");
    if (r.fail == FailMode::kBadFraming) {
      out.append("Content-Length: ");
      append_number(out, r.body_size);
      out.append("\r\nTransfer-Encoding: chunked\r\n");
    } else if (r.chunked) {
      out.append("Transfer-Encoding: chunked\r\n");
    } else {
      out.append("Content-Length: ");
      append_number(out, r.body_size);
      out.append("\r\n");
    }
  }
  if (!r.keep_alive) {
    out.append("Connection: close\r\n");
  } else if (r.http10) {
    out.append("Connection: keep-alive\r\n");
  }
  out.append("\r\n");
}

bool append_body(std::string& out, Response& r, std::string_view pattern, size_t period,
                 size_t high_water) {
  while (r.body_sent < r.send_limit && out.size() < high_water) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(kBodyPiece, r.send_limit - r.body_sent));
    std::string_view piece =
        r.use_text ? std::string_view(r.text).substr(r.body_sent, n)
                   : pattern.substr(static_cast<size_t>((r.body_offset + r.body_sent) % period), n);
    if (r.chunked) {
      append_number(out, piece.size(), 16);
      out.append("\r\n");
      out.append(piece);
      out.append("\r\n");
    } else {
      out.append(piece);
    }
    r.body_sent += n;
  }
  return r.body_sent >= r.send_limit;
}

void append_last_chunk(std::string& out) { out.append("0\r\n\r\n"); }

}  // namespace rondel::test_backend
