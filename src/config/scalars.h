// Scalar parsers shared inside src/config/: integers, addresses and spelling suggestions.
//
// Internal to the config module (not installed under include/). Every function here is pure,
// allocation-light and never throws; callers turn a failure into a ConfigError with a position.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "rondel/config/config.h"

namespace rondel::config {

// Parses a plain decimal unsigned integer ("0", "42"; no sign, no spaces, no 0x, no '_').
// Returns false on any other text or when the value does not fit in 64 bits.
bool parse_unsigned(std::string_view text, uint64_t& out) noexcept;

// Why a number with an optional unit did not parse.
enum class ParseStatus : uint8_t { kOk, kSyntax, kOverflow };

// parse_duration_ms() and parse_size_bytes() telling bad syntax apart from overflow.
ParseStatus parse_duration(std::string_view text, uint64_t& out) noexcept;
ParseStatus parse_size(std::string_view text, uint64_t& out) noexcept;

// The problem address_problem() reports for a port outside 0..65535.
inline constexpr char kPortOutOfRange[] = "the port must be a number between 0 and 65535";

// Parses `text` as an address like parse_address() does, accepting any port 0..65535.
// Returns nullptr on success, else a static sentence fragment saying what is wrong, e.g.
// "the port must be a number between 0 and 65535". `out` is unspecified on failure.
const char* address_problem(std::string_view text, bool allow_name, Address& out) noexcept;

// Optimal-string-alignment edit distance (insertions, deletions, substitutions and adjacent
// transpositions each cost 1). O(|a|·|b|) time; meant for short identifiers.
size_t edit_distance(std::string_view a, std::string_view b);

// The candidate closest to `word` if it is within edit distance 2 (ties: the earliest
// candidate), else an empty view. Used for "did you mean ...?" hints.
std::string_view closest_match(std::string_view word, std::span<const std::string_view> candidates);

// True when n is a prime number. Trial division: O(sqrt(n)), at most ~65536 steps for 32 bits.
bool is_prime(uint64_t n) noexcept;

}  // namespace rondel::config
