// Fuzz target: the chunked body decoder (RequestParser after a fixed chunked head).
//
// Input: 4 bytes of split seed, then the bytes after the head. Besides the driver's invariants,
// a small strict reference decoder (RFC 9112 7.1) checks every body rondel accepts: rondel may
// reject more than the reference, but whatever it accepts the reference must accept too, with
// the same body bytes and the same end of message (the smuggling-relevant property).
#include "http_driver.h"

using namespace rondel;

namespace {

constexpr std::string_view kHead =
    "POST /upload HTTP/1.1\r\nHost: fuzz\r\nTransfer-Encoding: chunked\r\n\r\n";

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Decodes a chunked body at the start of `in`. Returns the bytes it spans (0 = rejected or
// incomplete) and the decoded body in `out`. Chunk extensions and trailer fields are only
// checked for line structure (no CR, LF or NUL inside a line).
size_t reference_decode(std::string_view in, std::string& out) {
  size_t pos = 0;
  auto read_line = [&](std::string_view& line) {
    size_t crlf = in.find("\r\n", pos);
    if (crlf == std::string_view::npos) return false;
    line = in.substr(pos, crlf - pos);
    pos = crlf + 2;
    for (char c : line) {
      if (c == '\r' || c == '\n' || c == '\0') return false;
    }
    return true;
  };
  for (;;) {
    std::string_view line;
    if (!read_line(line)) return 0;
    uint64_t size = 0;
    size_t digits = 0;
    while (digits < line.size() && hex_value(line[digits]) >= 0) {
      if (size >> 60) return 0;  // overflow
      size = size * 16 + static_cast<uint64_t>(hex_value(line[digits]));
      ++digits;
    }
    if (digits == 0) return 0;
    std::string_view ext = line.substr(digits);
    size_t ows = ext.find_first_not_of(" \t");
    if (ows != std::string_view::npos && ext[ows] != ';') return 0;
    if (size == 0) {
      for (;;) {  // trailer section: field lines up to an empty line
        if (!read_line(line)) return 0;
        if (line.empty()) return pos;
        if (line.find(':') == std::string_view::npos) return 0;
      }
    }
    if (in.size() - pos < size + 2) return 0;
    out.append(in.substr(pos, size));
    pos += size;
    if (in.substr(pos, 2) != "\r\n") return 0;
    pos += 2;
  }
}

fuzz::Trace run(std::string_view wire, const std::vector<size_t>& cuts) {
  http::RequestParser parser(http::Limits{});
  return fuzz::drive(
      parser, wire, cuts,
      [](http::RequestParser& p, fuzz::Trace&) {
        fuzz::check_head(p.head());
        FUZZ_CHECK(p.head().framing == http::Framing::kChunked);
      },
      [](http::RequestParser&, fuzz::Trace&) { return false; },
      [](http::RequestParser&, fuzz::Trace&) {}, 1);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Reader in(data, size);
  const uint32_t seed = in.u32();
  const std::string_view body = in.rest();
  std::string wire;
  wire.reserve(kHead.size() + body.size());
  wire.append(kHead).append(body);
  const fuzz::Trace whole = run(wire, {});
  const fuzz::Trace split = run(wire, fuzz::make_cuts(seed, wire.size()));
  FUZZ_CHECK(whole.events == split.events && whole.body == split.body);
  FUZZ_CHECK(whole.error_status == split.error_status);
  if (whole.events == "HBE" || whole.events == "HE") {
    std::string decoded;
    const size_t spans = reference_decode(body, decoded);
    if (spans == 0) {
      std::fprintf(stderr, "rondel accepted a chunked body the reference rejects\n");
    }
    FUZZ_CHECK(spans != 0);
    FUZZ_CHECK(whole.consumed == kHead.size() + spans);
    FUZZ_CHECK(whole.body == decoded + "|");
  }
  return 0;
}
