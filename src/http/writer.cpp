#include "rondel/http/writer.h"

#include <array>
#include <charconv>

namespace rondel::http {

namespace {

void append_number(std::string& out, uint64_t n) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), n);
  (void)ec;  // 24 bytes always fit a uint64_t
  out.append(buf, static_cast<size_t>(end - buf));
}

void append_field(std::string& out, std::string_view name, std::string_view value) {
  out.append(name).append(": ").append(value).append("\r\n");
}

void append_status_line(std::string& out, uint16_t status, std::string_view reason) {
  out.append("HTTP/1.1 ");
  append_number(out, status);
  out.append(" ").append(reason).append("\r\n");
}

// Fields rondel itself rewrites in a forwarded request (the X-Forwarded ones only when it adds
// its own).
bool rewritten_in_request(std::string_view name, bool forwarded) noexcept {
  return iequals(name, "Content-Length") || iequals(name, "Expect") ||
         (forwarded && (iequals(name, "X-Forwarded-For") || iequals(name, "X-Forwarded-Proto")));
}

// X-Forwarded-For: the client's values (from every end-to-end field of that name) joined, then
// the client's address; X-Forwarded-Proto: fwd.proto, replacing the client's.
void append_forwarded(const RequestHead& head, const ForwardRequest& fwd, std::string& out) {
  bool xff_started = false;
  auto add_xff = [&](std::string_view v) {
    if (v.empty()) return;
    out.append(xff_started ? ", " : "X-Forwarded-For: ");
    out.append(v);
    xff_started = true;
  };
  for (const Header& h : head.headers) {
    if (!h.hop_by_hop && iequals(h.name, "X-Forwarded-For")) add_xff(h.value);
  }
  add_xff(fwd.client_ip);
  if (xff_started) out.append("\r\n");
  if (!fwd.proto.empty()) append_field(out, "X-Forwarded-Proto", fwd.proto);
}

}  // namespace

void write_request_head(const RequestHead& head, const ForwardRequest& fwd, std::string& out) {
  out.append(head.method).append(" ").append(head.target).append(" HTTP/1.1\r\n");
  bool has_host = false;
  for (const Header& h : head.headers) {
    if (h.hop_by_hop || rewritten_in_request(h.name, fwd.forwarded)) continue;
    if (iequals(h.name, "Host")) has_host = true;
    append_field(out, h.name, h.value);
  }
  // No Host field: the authority of the target (head.host), else the configured default.
  if (!has_host) append_field(out, "Host", head.host.empty() ? fwd.default_host : head.host);
  if (fwd.forwarded) append_forwarded(head, fwd, out);

  if (head.framing == Framing::kLength) {
    out.append("Content-Length: ");
    append_number(out, head.content_length);
    out.append("\r\n");
  } else if (head.framing == Framing::kChunked) {
    out.append("Transfer-Encoding: chunked\r\n");
  }
  out.append("\r\n");
}

ClientFraming choose_client_framing(const RequestHead& req, const ResponseHead& resp) noexcept {
  ClientFraming f;
  const bool client_is_10 = req.version_major == 1 && req.version_minor == 0;
  switch (resp.framing) {
    case Framing::kNone:
    case Framing::kLength:
      f.framing = resp.framing;
      break;
    case Framing::kChunked:
    case Framing::kUntilClose:
      if (client_is_10) {
        f.framing = Framing::kUntilClose;
        f.close_after = true;
      } else {
        f.framing = Framing::kChunked;
      }
      break;
  }
  if (!req.keep_alive) f.close_after = true;
  return f;
}

void write_response_head(const RequestHead& req, const ResponseHead& resp,
                         const ClientFraming& framing, std::string& out) {
  append_status_line(out, resp.status, resp.reason);
  // A bodiless response to HEAD, or a 304, may state the length the full response would have
  // (RFC 9110 8.6); that field is passed through as is.
  const bool keep_length = framing.framing == Framing::kNone &&
                           (req.is_head || resp.status == 304);
  for (const Header& h : resp.headers) {
    if (h.hop_by_hop) continue;
    if (iequals(h.name, "Content-Length") && !keep_length) continue;
    append_field(out, h.name, h.value);
  }
  if (framing.framing == Framing::kLength) {
    out.append("Content-Length: ");
    append_number(out, resp.content_length);
    out.append("\r\n");
  } else if (framing.framing == Framing::kChunked) {
    out.append("Transfer-Encoding: chunked\r\n");
  }
  if (framing.close_after) {
    out.append("Connection: close\r\n");
  } else if (req.version_major == 1 && req.version_minor == 0) {
    out.append("Connection: keep-alive\r\n");
  }
  out.append("\r\n");
}

void write_interim_head(const ResponseHead& resp, std::string& out) {
  append_status_line(out, resp.status, resp.reason);
  for (const Header& h : resp.headers) {
    if (h.hop_by_hop || iequals(h.name, "Content-Length")) continue;
    append_field(out, h.name, h.value);
  }
  out.append("\r\n");
}

size_t chunk_header(uint64_t n, char* buf) noexcept {
  auto [end, ec] = std::to_chars(buf, buf + 16, n, 16);
  (void)ec;  // 16 hex digits always fit a uint64_t
  end[0] = '\r';
  end[1] = '\n';
  return static_cast<size_t>(end - buf) + 2;
}

namespace {

// A canned response built at compile time.
struct CannedText {
  std::array<char, 192> data{};
  size_t size = 0;

  constexpr void add(std::string_view s) {
    for (char c : s) data[size++] = c;
  }
  constexpr void add_number(size_t n) {
    char digits[20]{};
    size_t count = 0;
    do {
      digits[count++] = static_cast<char>('0' + n % 10);
      n /= 10;
    } while (n != 0);
    while (count != 0) data[size++] = digits[--count];
  }
  constexpr std::string_view view() const { return {data.data(), size}; }
};

constexpr CannedText make_canned(std::string_view code, std::string_view reason) {
  CannedText t;
  t.add("HTTP/1.1 ");
  t.add(code);
  t.add(" ");
  t.add(reason);
  t.add("\r\nContent-Type: text/plain\r\nContent-Length: ");
  t.add_number(code.size() + 1 + reason.size() + 1);
  t.add("\r\nConnection: close\r\n\r\n");
  t.add(code);
  t.add(" ");
  t.add(reason);
  t.add("\n");
  return t;
}

constexpr CannedText k400 = make_canned("400", "Bad Request");
constexpr CannedText k404 = make_canned("404", "Not Found");
constexpr CannedText k405 = make_canned("405", "Method Not Allowed");
constexpr CannedText k408 = make_canned("408", "Request Timeout");
constexpr CannedText k413 = make_canned("413", "Content Too Large");
constexpr CannedText k414 = make_canned("414", "URI Too Long");
constexpr CannedText k431 = make_canned("431", "Request Header Fields Too Large");
constexpr CannedText k500 = make_canned("500", "Internal Server Error");
constexpr CannedText k501 = make_canned("501", "Not Implemented");
constexpr CannedText k502 = make_canned("502", "Bad Gateway");
constexpr CannedText k503 = make_canned("503", "Service Unavailable");
constexpr CannedText k504 = make_canned("504", "Gateway Timeout");
constexpr CannedText k505 = make_canned("505", "HTTP Version Not Supported");

}  // namespace

std::string_view canned_response(uint16_t status) noexcept {
  switch (status) {
    case 400: return k400.view();
    case 404: return k404.view();
    case 405: return k405.view();
    case 408: return k408.view();
    case 413: return k413.view();
    case 414: return k414.view();
    case 431: return k431.view();
    case 501: return k501.view();
    case 502: return k502.view();
    case 503: return k503.view();
    case 504: return k504.view();
    case 505: return k505.view();
    default: return k500.view();
  }
}

}  // namespace rondel::http
