// Fuzz target: net::ProxyHeaderParser (PROXY protocol v1/v2 header) over arbitrary bytes.
//
// Input: 4 bytes of split seed, then the wire bytes. Invariants: feed() never consumes more than
// it was given and consumes everything on kNeedMore; a decided parser stays decided and consumes
// nothing more; a header is never longer than its version's bound (107 bytes for v1, 16 + 2048
// for v2) and its length is exactly the bytes consumed; an undecided parser has seen fewer bytes
// than the largest bound; and the same wire cut at different points (every byte apart, and at
// seeded points) yields the same status, length, error and addresses as the whole wire at once.
#include <cstring>
#include <vector>

#include "fuzz_util.h"
#include "rondel/net/proxy_protocol.h"

using namespace rondel;
using net::ProxyHeaderParser;

namespace {

struct Trace {
  ProxyHeaderParser::Status status = ProxyHeaderParser::Status::kNeedMore;
  size_t consumed = 0;
  ProxyHeaderParser parser;
};

void drive(Trace& t, const uint8_t* wire, size_t n, const std::vector<size_t>& cuts) {
  size_t at = 0;
  std::vector<size_t> ends = cuts;
  ends.push_back(n);
  for (size_t end : ends) {
    if (end < at) continue;
    const size_t piece = end - at;
    auto st = t.parser.feed(wire + at, piece);
    FUZZ_CHECK(st.consumed <= piece);
    if (t.status != ProxyHeaderParser::Status::kNeedMore) {
      FUZZ_CHECK(st.status == t.status && st.consumed == 0);  // decided stays decided
    } else {
      t.consumed += st.consumed;
      if (st.status == ProxyHeaderParser::Status::kNeedMore) FUZZ_CHECK(st.consumed == piece);
    }
    t.status = st.status;
    at = end;
  }
  const net::ProxyHeader& h = t.parser.header();
  switch (t.status) {
    case ProxyHeaderParser::Status::kDone:
      FUZZ_CHECK(h.length == t.consumed);
      FUZZ_CHECK(h.length <= (h.version == net::ProxyVersion::kV1 ? ProxyHeaderParser::kMaxV1Length
                                                                   : ProxyHeaderParser::kMaxV2Length));
      break;
    case ProxyHeaderParser::Status::kInvalid:
      FUZZ_CHECK(t.parser.error() < net::ProxyReject::kUntrusted);  // only parser reasons
      break;
    case ProxyHeaderParser::Status::kNeedMore:
      FUZZ_CHECK(t.consumed == n);
      FUZZ_CHECK(t.consumed < ProxyHeaderParser::kMaxV2Length);
      break;
  }
}

void check_same(const Trace& a, const Trace& b) {
  FUZZ_CHECK(a.status == b.status);
  FUZZ_CHECK(a.consumed == b.consumed);
  if (a.status == ProxyHeaderParser::Status::kInvalid) {
    FUZZ_CHECK(a.parser.error() == b.parser.error());
  }
  if (a.status == ProxyHeaderParser::Status::kDone) {
    const auto &x = a.parser.header(), &y = b.parser.header();
    FUZZ_CHECK(x.version == y.version && x.command == y.command && x.family == y.family);
    FUZZ_CHECK(x.length == y.length);
    FUZZ_CHECK(x.source.addr == y.source.addr && x.source.port == y.source.port);
    FUZZ_CHECK(x.destination.addr == y.destination.addr &&
               x.destination.port == y.destination.port);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Reader in(data, size);
  uint32_t seed = in.u32();
  std::string_view rest = in.rest();
  const auto* wire = reinterpret_cast<const uint8_t*>(rest.data());
  const size_t n = rest.size();

  Trace whole;
  drive(whole, wire, n, {});

  std::vector<size_t> cuts;
  for (size_t at = 0; n > 0 && cuts.size() < 16;) {
    seed = seed * 1103515245u + 12345u;
    at += 1 + (seed >> 16) % 64;
    if (at >= n) break;
    cuts.push_back(at);
  }
  Trace split;
  drive(split, wire, n, cuts);
  check_same(whole, split);

  // One byte at a time, over the part a header can span (and a little past it).
  const size_t span = n < ProxyHeaderParser::kMaxV2Length + 8 ? n : ProxyHeaderParser::kMaxV2Length + 8;
  std::vector<size_t> every;
  for (size_t i = 1; i < span; ++i) every.push_back(i);
  Trace bytes;
  drive(bytes, wire, n, every);
  check_same(whole, bytes);
  return 0;
}
