// CRC-32 (IEEE 802.3, the zlib/PNG polynomial 0xEDB88320, reflected), computed incrementally so a
// request body can be checksummed while it streams. Matches Python's zlib.crc32.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace rondel::test_backend {

namespace detail {
constexpr std::array<uint32_t, 256> make_crc32_table() noexcept {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    table[i] = c;
  }
  return table;
}
inline constexpr std::array<uint32_t, 256> kCrc32Table = make_crc32_table();
}  // namespace detail

// Continues a CRC-32: start with crc = 0, feed the pieces in order. Cost: one table lookup a byte.
inline uint32_t crc32_update(uint32_t crc, const char* data, size_t len) noexcept {
  crc = ~crc;
  for (size_t i = 0; i < len; ++i) {
    crc = detail::kCrc32Table[(crc ^ static_cast<unsigned char>(data[i])) & 0xFFu] ^ (crc >> 8);
  }
  return ~crc;
}

}  // namespace rondel::test_backend
