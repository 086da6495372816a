// Shared helpers of the fuzz targets: a byte reader over the fuzzer's input, an invariant check
// that aborts (so libFuzzer records the input), and a driver that feeds an HTTP parser the way
// a session does, recording what it reports so two runs can be compared.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "rondel/http/parser.h"

namespace rondel::fuzz {

// Aborts with a message when an invariant does not hold: libFuzzer (or the replay runner) then
// reports the input as a crash.
#define FUZZ_CHECK(cond)                                                                   \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      std::fprintf(stderr, "invariant failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__);   \
      std::abort();                                                                        \
    }                                                                                      \
  } while (0)

// Takes bytes off the front of the input; past the end every read returns 0.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : p_(data), n_(size) {}
  uint8_t u8() noexcept { return n_ == 0 ? 0 : (--n_, *p_++); }
  uint16_t u16() noexcept { return static_cast<uint16_t>(u8() | (u8() << 8)); }
  uint32_t u32() noexcept { return u16() | (static_cast<uint32_t>(u16()) << 16); }
  uint64_t u64() noexcept { return u32() | (static_cast<uint64_t>(u32()) << 32); }
  bool empty() const noexcept { return n_ == 0; }
  std::string_view rest() noexcept {
    std::string_view r(reinterpret_cast<const char*>(p_), n_);
    p_ += n_;
    n_ = 0;
    return r;
  }

 private:
  const uint8_t* p_;
  size_t n_;
};

// What a parser reported for one input, in order: comparable across different split points.
struct Trace {
  std::string events;  // one letter per event: H head, B body, E end, X error
  std::string heads;   // a rendering of every head seen
  std::string body;    // body bytes of every message, concatenated
  uint16_t error_status = 0;
  std::string error_reason;
  size_t consumed = 0;  // input bytes consumed up to the last event
  bool operator==(const Trace&) const = default;
};

std::string render(const http::RequestHead& h);
std::string render(const http::ResponseHead& h);

// Checks the head's framing against its own header list (the invariants a forwarder relies on).
void check_head(const http::RequestHead& h);
void check_head(const http::ResponseHead& h, bool request_was_head);

}  // namespace rondel::fuzz
