// XXH3 key hashing and the 64-bit mixer used by placement.
#include "rondel/core/hash.h"

#include <xxhash.h>

#include <bit>

namespace rondel::core {

uint64_t hash64(std::string_view bytes, uint64_t seed) noexcept {
  return XXH3_64bits_withSeed(bytes.data(), bytes.size(), seed);
}

uint64_t mix64(uint64_t a, uint64_t b) noexcept {
  return mix64_finish(a ^ mix64_prepare(b));
}

}  // namespace rondel::core
