// Bit helpers over caller-provided std::span<uint64_t> scratch, used by cursors and picks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace rondel::core {

// Number of 64-bit words needed to hold `bits` bits.
constexpr size_t bitset_words(size_t bits) noexcept {
  return (bits + 63) / 64;
}

// Returns whether bit i is set; bits beyond the span read as 0 (so an empty span means "none").
inline bool bit_test(std::span<const uint64_t> words, size_t i) noexcept {
  const size_t w = i >> 6;
  return w < words.size() && ((words[w] >> (i & 63)) & 1u) != 0;
}

// Sets bit i. Precondition: i < 64 * words.size().
inline void bit_set(std::span<uint64_t> words, size_t i) noexcept {
  words[i >> 6] |= uint64_t{1} << (i & 63);
}

}  // namespace rondel::core
