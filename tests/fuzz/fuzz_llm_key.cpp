// Fuzz target: the llm_prefix body scanner (proxy/llm_key.h) over arbitrary bodies.
//
// Input: 1 byte choosing the options (anchor, conversation_blocks, explicit fields) and 1 byte
// the feed piece size, then the body. Invariants: never crashes; the keys (all but
// anchor_offset; only the verdict for a refused body) are the same fed at once, in pieces and one
// byte at a time; feeding the rest after kDone or kInvalid changes neither the status nor the keys;
// a reused (reset) scanner gives what a fresh one gives; an explicit value is at most kMaxExplicit
// bytes.
#include <string_view>

#include "fuzz_util.h"
#include "rondel/proxy/llm_key.h"

using namespace rondel;

namespace {

struct Result {
  proxy::LlmScan status;
  proxy::LlmKeys keys;
  std::string value;
};

void same(const Result& a, const Result& b) {
  FUZZ_CHECK(a.status == b.status);
  // A refused body's keys are what was seen before the error, and a string the error cut is
  // seen only when it came in pieces (the parser hands over a string's part at each piece's
  // end): compare only the verdict.
  if (a.status == proxy::LlmScan::kInvalid) return;
  FUZZ_CHECK(a.keys.has_tenant == b.keys.has_tenant && a.keys.tenant == b.keys.tenant);
  FUZZ_CHECK(a.keys.has_conversation == b.keys.has_conversation);
  FUZZ_CHECK(a.keys.conversation == b.keys.conversation);
  FUZZ_CHECK(a.keys.explicit_key == b.keys.explicit_key);
  FUZZ_CHECK(a.keys.explicit_index == b.keys.explicit_index && a.value == b.value);
  FUZZ_CHECK(a.keys.blocks == b.keys.blocks && a.keys.form == b.keys.form);
}

// Feeds `body` in pieces of `piece` bytes; after the scan settles, feeds the rest too and
// checks nothing changes.
Result run(proxy::LlmKeyScanner& s, const proxy::LlmKeyOptions& o, std::string_view body,
           size_t piece) {
  s.reset(o);
  proxy::LlmScan st = proxy::LlmScan::kMore;
  size_t at = 0;
  while (st == proxy::LlmScan::kMore && at < body.size()) {
    const size_t n = std::min(piece, body.size() - at);
    st = s.feed(body.substr(at, n), at + n == body.size());
    at += n;
  }
  if (body.empty()) st = s.feed({}, true);
  Result r{st, s.keys(), std::string(s.explicit_value())};
  FUZZ_CHECK(r.value.size() <= proxy::LlmKeyScanner::kMaxExplicit);
  FUZZ_CHECK(r.keys.explicit_key || r.value.empty());
  if (at < body.size()) {
    FUZZ_CHECK(s.feed(body.substr(at), true) == st);
    same(r, Result{st, s.keys(), std::string(s.explicit_value())});
    FUZZ_CHECK(s.keys().anchor_offset == r.keys.anchor_offset);
  }
  return r;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  static proxy::LlmKeyScanner reused;  // reset between inputs: no state may leak
  proxy::LlmKeyOptions o;
  o.conversation = static_cast<proxy::LlmAnchor>(data[0] % 3);
  o.conversation_blocks = 1 + ((data[0] >> 2) & 7);
  if (data[0] & 0x40) o.explicit_fields = {"prompt_cache_key", "user"};
  if (data[0] & 0x80) o.explicit_fields.push_back("x");
  const size_t piece = 1 + data[1];
  const std::string_view body(reinterpret_cast<const char*>(data + 2), size - 2);
  proxy::LlmKeyScanner fresh;
  const Result whole = run(fresh, o, body, body.size() + 1);
  same(whole, run(reused, o, body, piece));
  if (body.size() <= 4096) same(whole, run(fresh, o, body, 1));
  return 0;
}
