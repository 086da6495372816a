// Invariant checks on parsed heads, shared by the HTTP fuzz targets.
#include "http_driver.h"

#include <charconv>

namespace rondel::fuzz {

namespace {

template <class Head>
std::string render_headers(const Head& h) {
  std::string s;
  for (const http::Header& f : h.headers) {
    s.append(f.name).append(": ").append(f.value).append("\n");
  }
  s += "framing=" + std::to_string(static_cast<int>(h.framing)) +
       " cl=" + std::to_string(h.content_length) + " ka=" + std::to_string(h.keep_alive) +
       " v=" + std::to_string(h.version_major) + "." + std::to_string(h.version_minor) + "\n";
  return s;
}

// The framing fields of a header list: how many CL / TE fields and their values.
struct FramingFields {
  int cl = 0;
  int te = 0;
  std::string_view cl_value;
  std::string_view te_value;
};

FramingFields framing_fields(std::span<const http::Header> headers) {
  FramingFields f;
  for (const http::Header& h : headers) {
    if (http::iequals(h.name, "Content-Length")) {
      ++f.cl;
      f.cl_value = h.value;
    } else if (http::iequals(h.name, "Transfer-Encoding")) {
      ++f.te;
      f.te_value = h.value;
    }
  }
  return f;
}

uint64_t parse_decimal(std::string_view v) {
  uint64_t n = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  FUZZ_CHECK(ec == std::errc() && p == v.data() + v.size());
  return n;
}

bool is_ctl(unsigned char c) { return (c < 0x20 && c != '\t') || c == 0x7f; }

void check_fields(std::span<const http::Header> headers) {
  for (const http::Header& h : headers) {
    FUZZ_CHECK(!h.name.empty());
    for (unsigned char c : h.name) FUZZ_CHECK(c > 0x20 && c < 0x7f && c != ':');
    for (unsigned char c : h.value) FUZZ_CHECK(!is_ctl(c));
  }
}

}  // namespace

std::string render(const http::RequestHead& h) {
  std::string s;
  s.append(h.method).append(" ").append(h.target).append(" host=").append(h.host);
  s += " ec=" + std::to_string(h.expect_continue) + "\n";
  return s + render_headers(h);
}

std::string render(const http::ResponseHead& h) {
  std::string s = std::to_string(h.status) + " ";
  s.append(h.reason).append("\n");
  return s + render_headers(h);
}

void check_head(const http::RequestHead& h) {
  check_fields(h.headers);
  FUZZ_CHECK(h.version_major == 1 && h.version_minor <= 1);
  FUZZ_CHECK(!h.method.empty() && h.method != "CONNECT");
  FUZZ_CHECK(!h.target.empty());
  for (unsigned char c : h.target) FUZZ_CHECK(c > 0x20 && c != 0x7f && c != '#');
  int hosts = 0;
  for (const http::Header& f : h.headers) {
    if (http::iequals(f.name, "Host")) ++hosts;
    FUZZ_CHECK(!http::iequals(f.name, "Upgrade"));
  }
  FUZZ_CHECK(hosts <= 1);
  if (h.version_minor == 1) FUZZ_CHECK(hosts == 1);
  const FramingFields f = framing_fields(h.headers);
  FUZZ_CHECK(f.cl <= 1 && f.te <= 1 && !(f.cl && f.te));
  switch (h.framing) {
    case http::Framing::kNone:
      FUZZ_CHECK(f.cl == 0 && f.te == 0);
      break;
    case http::Framing::kLength:
      FUZZ_CHECK(f.cl == 1 && parse_decimal(f.cl_value) == h.content_length);
      break;
    case http::Framing::kChunked:
      FUZZ_CHECK(f.te == 1 && http::iequals(f.te_value, "chunked") && h.version_minor == 1);
      break;
    case http::Framing::kUntilClose:
      FUZZ_CHECK(false && "a request is never close-delimited");
  }
}

void check_head(const http::ResponseHead& h, bool request_was_head) {
  check_fields(h.headers);
  FUZZ_CHECK(h.version_major == 1 && h.version_minor <= 1);
  FUZZ_CHECK(h.status >= 100 && h.status <= 999 && h.status != 101);
  const FramingFields f = framing_fields(h.headers);
  FUZZ_CHECK(f.cl <= 1 && f.te <= 1 && !(f.cl && f.te));
  const bool bodiless = request_was_head || h.status < 200 || h.status == 204 || h.status == 304;
  if (bodiless) {
    FUZZ_CHECK(h.framing == http::Framing::kNone);
    return;
  }
  switch (h.framing) {
    case http::Framing::kNone:
      FUZZ_CHECK(false && "a response with a body is never kNone");
      break;
    case http::Framing::kLength:
      FUZZ_CHECK(f.cl == 1 && parse_decimal(f.cl_value) == h.content_length);
      break;
    case http::Framing::kChunked:
      FUZZ_CHECK(f.te == 1 && http::iequals(f.te_value, "chunked"));
      break;
    case http::Framing::kUntilClose:
      FUZZ_CHECK(f.cl == 0 && f.te == 0);
      break;
  }
}

}  // namespace rondel::fuzz
