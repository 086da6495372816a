// Byte ranges in rondel-test-backend: the single `Range: bytes=...` requests it answers with a
// 206 slice of its synthetic object, and the block-granular cache model that counts misses per
// cached block (--cache-block), so a range benchmark sees what a chunked cache would see.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "lru_cache.h"

namespace rondel::test_backend {

enum class RangeKind : uint8_t {
  kNone,           // no Range, or one this backend ignores (another unit, several ranges, junk)
  kSatisfiable,    // answer 206 with bytes [first, last]
  kUnsatisfiable,  // answer 416 (first byte at or past the end of the object)
};

struct ByteRange {
  RangeKind kind = RangeKind::kNone;
  uint64_t first = 0;
  uint64_t last = 0;  // inclusive
};

// Parses a Range header value against an object of `size` bytes: "bytes=a-b", "bytes=a-" and
// "bytes=-n" (one range; the unit case-insensitive, spaces around the range allowed). A last
// byte past the end is clamped to size - 1. Anything else is kNone: the whole object is served,
// which RFC 9110 14.2 allows. Never allocates.
ByteRange parse_range(std::string_view value, uint64_t size) noexcept;

// Looks the blocks [first / block, last / block] of `target` up in `cache` (keys "target#N"),
// adding the hits and misses to the counters. Returns whether every block was a hit.
// Precondition: block > 0, first <= last. Allocates the keys of missed blocks.
bool lookup_blocks(LruCache& cache, std::string_view target, uint64_t first, uint64_t last,
                   uint64_t block, uint64_t& hits, uint64_t& misses);

}  // namespace rondel::test_backend
