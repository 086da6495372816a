// Hashing primitives for placement: XXH3 over request keys and backend ids, and a 64-bit mixer.
#pragma once

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

}  // namespace rondel::core
