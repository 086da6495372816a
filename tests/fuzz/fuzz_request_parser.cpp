// Fuzz target: http::RequestParser (llhttp strict + rondel's guards) over arbitrary bytes.
//
// Input: 1 byte of options (limits), 4 bytes of split seed, then the wire bytes (one or more
// pipelined requests). Invariants: feed() never consumes more than it was given and consumes
// everything on kNeedMore; every kHead has self-consistent framing (check_head); body bytes add
// up to Content-Length; and the same wire cut at different points yields the same trace.
#include "http_driver.h"

using namespace rondel;

namespace {

http::Limits limits_for(uint8_t opt) {
  http::Limits l;
  if (opt & 1) {
    l.max_request_line = 64;
    l.max_header_bytes = 256;
    l.max_headers = 8;
  }
  if (opt & 2) l.max_body_bytes = 32;
  return l;
}

fuzz::Trace run(std::string_view wire, const std::vector<size_t>& cuts, const http::Limits& l) {
  http::RequestParser parser(l);
  return fuzz::drive(
      parser, wire, cuts,
      [](http::RequestParser& p, fuzz::Trace& t) {
        fuzz::check_head(p.head());
        t.heads += fuzz::render(p.head());
        FUZZ_CHECK(p.head_bytes_pending() == 0);
      },
      [](http::RequestParser& p, fuzz::Trace&) {
        p.reset();
        return true;
      },
      [](http::RequestParser&, fuzz::Trace&) {});
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Reader in(data, size);
  const http::Limits limits = limits_for(in.u8());
  const uint32_t seed = in.u32();
  const std::string wire(in.rest());  // an exact-size copy, so ASan sees reads past the end
  const fuzz::Trace whole = run(wire, {}, limits);
  const fuzz::Trace split = run(wire, fuzz::make_cuts(seed, wire.size()), limits);
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
  return 0;
}
