// Range parsing and the block cache model of rondel-test-backend.
#include "range.h"

#include <charconv>

#include "rondel/util/ascii.h"

namespace rondel::test_backend {

namespace {

using util::iequals;
using util::trim_ows;

bool parse_number(std::string_view s, uint64_t& out) noexcept {
  if (s.empty()) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc{} && end == s.data() + s.size();
}

}  // namespace

ByteRange parse_range(std::string_view value, uint64_t size) noexcept {
  ByteRange r;
  value = trim_ows(value);
  const size_t eq = value.find('=');
  if (eq == std::string_view::npos || !iequals(trim_ows(value.substr(0, eq)), "bytes")) return r;
  const std::string_view spec = trim_ows(value.substr(eq + 1));
  const size_t dash = spec.find('-');
  if (dash == std::string_view::npos || spec.find(',') != std::string_view::npos) return r;
  const std::string_view a = spec.substr(0, dash);
  const std::string_view b = spec.substr(dash + 1);
  uint64_t first = 0, last = 0;
  if (a.empty()) {  // suffix range: the last n bytes
    if (!parse_number(b, last) || last == 0) return r;
    if (size == 0) return ByteRange{RangeKind::kUnsatisfiable, 0, 0};
    return ByteRange{RangeKind::kSatisfiable, last >= size ? 0 : size - last, size - 1};
  }
  if (!parse_number(a, first)) return r;
  if (b.empty()) {
    last = UINT64_MAX;
  } else if (!parse_number(b, last) || last < first) {
    return r;
  }
  if (first >= size) return ByteRange{RangeKind::kUnsatisfiable, 0, 0};
  return ByteRange{RangeKind::kSatisfiable, first, last >= size ? size - 1 : last};
}

bool lookup_blocks(LruCache& cache, std::string_view target, uint64_t first, uint64_t last,
                   uint64_t block, uint64_t& hits, uint64_t& misses) {
  bool all_hit = true;
  std::string key;
  for (uint64_t i = first / block; i <= last / block; ++i) {
    key.assign(target).push_back('#');
    key.append(std::to_string(i));
    if (cache.lookup(key)) {
      ++hits;
    } else {
      ++misses;
      all_hit = false;
    }
  }
  return all_hit;
}

}  // namespace rondel::test_backend
