// XXH3 key hashing and the 64-bit mixer used by placement.
#include "rondel/core/hash.h"

#include <xxhash.h>

#include <bit>

namespace rondel::core {

uint64_t hash64(std::string_view bytes, uint64_t seed) noexcept {
  return XXH3_64bits_withSeed(bytes.data(), bytes.size(), seed);
}

uint64_t mix64(uint64_t a, uint64_t b) noexcept {
  uint64_t x = a ^ (std::rotl(b, 32) * 0x9E3779B97F4A7C15ull);
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return x;
}

}  // namespace rondel::core
