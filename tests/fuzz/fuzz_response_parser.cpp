// Fuzz target: http::ResponseParser, as used on a backend connection.
//
// Input: 1 byte of options (bit 0: the request was HEAD; bit 1: small limits; bit 2: the
// backend closes after the bytes: call finish()), 4 bytes of split seed, then the wire bytes
// (interim responses, a final response, maybe more responses on the connection). Invariants: the
// feed() contract, check_head on every head (no body for HEAD/1xx/204/304), Content-Length body
// accounting, finish() ending only close-delimited or complete messages, split independence.
#include "http_driver.h"

using namespace rondel;

namespace {

fuzz::Trace run(std::string_view wire, const std::vector<size_t>& cuts, uint8_t opt) {
  http::Limits limits;
  if (opt & 2) {
    limits.max_request_line = 64;
    limits.max_header_bytes = 256;
    limits.max_headers = 8;
    limits.max_body_bytes = 32;
  }
  const bool is_head = opt & 1;
  http::ResponseParser parser(limits);
  parser.begin(is_head);
  return fuzz::drive(
      parser, wire, cuts,
      [is_head](http::ResponseParser& p, fuzz::Trace& t) {
        fuzz::check_head(p.head(), is_head);
        t.heads += fuzz::render(p.head());
      },
      [is_head](http::ResponseParser& p, fuzz::Trace&) {
        p.begin(is_head);  // the next interim or final response on the connection
        return true;
      },
      [opt](http::ResponseParser& p, fuzz::Trace& t) {
        if (!(opt & 4)) return;
        http::Step s = p.finish();
        FUZZ_CHECK(s.consumed == 0);
        FUZZ_CHECK(s.event == http::Event::kMessageEnd || s.event == http::Event::kError);
        if (s.event == http::Event::kError) {
          FUZZ_CHECK(p.error().status == 502);
          t.events += 'X';
        } else {
          t.events += 'F';
        }
        // finish() is idempotent.
        http::Step again = p.finish();
        FUZZ_CHECK(again.event == s.event);
      });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Reader in(data, size);
  const uint8_t opt = in.u8();
  const uint32_t seed = in.u32();
  const std::string wire(in.rest());
  const fuzz::Trace whole = run(wire, {}, opt);
  const fuzz::Trace split = run(wire, fuzz::make_cuts(seed, wire.size()), opt);
  // Both runs must agree on every message they accept. When the input is rejected they must
  // both reject it, but which check fires first (rondel's byte scanner, llhttp, or a per-callback
  // body limit) may depend on where the bytes were cut, and so may how much body was delivered first.
  const bool failed = !whole.events.empty() && whole.events.back() == 'X';
  FUZZ_CHECK(failed == (!split.events.empty() && split.events.back() == 'X'));
  if (!failed) {
    FUZZ_CHECK(whole.events == split.events);
    FUZZ_CHECK(whole.heads == split.heads);
    FUZZ_CHECK(whole.body == split.body);
  }
  if (whole.error_status != 0) FUZZ_CHECK(whole.error_status == 502);
  return 0;
}
