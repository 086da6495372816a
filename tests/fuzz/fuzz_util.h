// Shared helpers of the fuzz targets: a byte reader over the fuzzer's input and an invariant
// check that aborts (so libFuzzer records the input). The HTTP targets' driver is http_driver.h.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

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

}  // namespace rondel::fuzz
