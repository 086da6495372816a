// Hashing primitives for placement: XXH3 over request keys and backend ids, and a 64-bit mixer.
#pragma once

#include <bit>
#include <cstdint>
#include <string_view>

namespace rondel::core {

// Returns XXH3-64 (xxHash 0.8, XXH3_64bits_withSeed) of `bytes` with `seed`.
// Stable across platforms and xxHash 0.8.x releases: placement and key hashes are pinned to it,
// and tests pin known answers produced by the `xxhsum -H3` tool. Any thread; never allocates.
uint64_t hash64(std::string_view bytes, uint64_t seed = 0) noexcept;

// Mixes two 64-bit values into one well-distributed 64-bit value (the splitmix64 finaliser,
// Steele, Lea, Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014, applied to
// a ^ (rotl(b, 32) * golden-ratio constant)). For a fixed b it is a bijection of a. Used for
// rendezvous scores (mix64(key_hash, id_hash)) and for key-seeded probes (mix64(key_hash,
// attempt)). Pure integer arithmetic: identical on every platform. A few nanoseconds.
uint64_t mix64(uint64_t a, uint64_t b) noexcept;

// mix64 in two inline halves, for loops that mix one `a` against many fixed `b` prepared once:
// mix64(a, b) == mix64_finish(a ^ mix64_prepare(b)) for all a, b.
constexpr uint64_t mix64_prepare(uint64_t b) noexcept {
  return std::rotl(b, 32) * 0x9E3779B97F4A7C15ull;
}
constexpr uint64_t mix64_finish(uint64_t x) noexcept {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return x;
}

}  // namespace rondel::core
