// Scalar parsers: unsigned integers, durations, sizes, spelling suggestions, primality.

#include "scalars.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "rondel/config/loader.h"

namespace rondel::config {
namespace {

struct Unit {
  std::string_view suffix;
  uint64_t factor;
};

// Longest suffixes first where one suffix ends another ("ms" before "s", "KiB" before "B").
constexpr Unit kDurationUnits[] = {
    {"ms", 1},
    {"s", 1000},
    {"m", 60 * 1000},
    {"h", 60 * 60 * 1000},
};

constexpr uint64_t kKiB = 1024;
constexpr Unit kSizeUnits[] = {
    {"KiB", kKiB},
    {"MiB", kKiB* kKiB},
    {"GiB", kKiB* kKiB* kKiB},
    {"TiB", kKiB* kKiB* kKiB* kKiB},
    {"KB", 1000},
    {"MB", 1000 * 1000},
    {"GB", 1000ull * 1000 * 1000},
    {"TB", 1000ull * 1000 * 1000 * 1000},
    {"B", 1},
};

bool is_digit(char c) noexcept {
  return c >= '0' && c <= '9';
}

// Splits "123unit" into a number and a unit found in `units` (no unit: factor 1 when
// `bare_ok`), and multiplies, rejecting overflow.
template <size_t N>
ParseStatus parse_with_units(std::string_view text, const Unit (&units)[N],
                             uint64_t& out) noexcept {
  size_t digits = 0;
  while (digits < text.size() && is_digit(text[digits])) ++digits;
  if (digits == 0) return ParseStatus::kSyntax;
  const std::string_view suffix = text.substr(digits);
  uint64_t factor = 1;
  if (!suffix.empty()) {
    const auto* unit = std::find_if(std::begin(units), std::end(units),
                                    [&](const Unit& u) { return u.suffix == suffix; });
    if (unit == std::end(units)) return ParseStatus::kSyntax;
    factor = unit->factor;
  }
  uint64_t number = 0;
  if (!parse_unsigned(text.substr(0, digits), number)) return ParseStatus::kOverflow;
  if (number > std::numeric_limits<uint64_t>::max() / factor) return ParseStatus::kOverflow;
  out = number * factor;
  return ParseStatus::kOk;
}

}  // namespace

bool parse_unsigned(std::string_view text, uint64_t& out) noexcept {
  if (text.empty()) return false;
  uint64_t value = 0;
  for (char c : text) {
    if (!is_digit(c)) return false;
    const uint64_t digit = static_cast<uint64_t>(c - '0');
    if (value > (std::numeric_limits<uint64_t>::max() - digit) / 10) return false;
    value = value * 10 + digit;
  }
  out = value;
  return true;
}

ParseStatus parse_duration(std::string_view text, uint64_t& out) noexcept {
  return parse_with_units(text, kDurationUnits, out);
}

ParseStatus parse_size(std::string_view text, uint64_t& out) noexcept {
  return parse_with_units(text, kSizeUnits, out);
}

bool parse_duration_ms(std::string_view text, uint64_t& out) noexcept {
  return parse_duration(text, out) == ParseStatus::kOk;
}

bool parse_size_bytes(std::string_view text, uint64_t& out) noexcept {
  return parse_size(text, out) == ParseStatus::kOk;
}

size_t edit_distance(std::string_view a, std::string_view b) {
  // Three rolling rows: the transposition rule needs the row two steps back.
  std::vector<size_t> two_back(b.size() + 1), prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        cur[j] = std::min(cur[j], two_back[j - 2] + 1);
      }
    }
    std::swap(two_back, prev);
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string_view closest_match(std::string_view word,
                               std::span<const std::string_view> candidates) {
  constexpr size_t kMaxDistance = 2;
  std::string_view best;
  size_t best_distance = kMaxDistance + 1;
  for (std::string_view candidate : candidates) {
    const size_t d = edit_distance(word, candidate);
    // A one-letter word is "within 2" of every two-letter key; require some overlap.
    if (d < best_distance && d < word.size()) {
      best = candidate;
      best_distance = d;
    }
  }
  return best;
}

bool is_prime(uint64_t n) noexcept {
  if (n < 2) return false;
  if (n % 2 == 0) return n == 2;
  for (uint64_t d = 3; d <= n / d; d += 2) {
    if (n % d == 0) return false;
  }
  return true;
}

}  // namespace rondel::config
