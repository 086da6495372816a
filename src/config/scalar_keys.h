// Scalar config keys as table rows (nginx's ngx_command_t with an offsetof setter): a row names
// the key, how its value is read (a count, a duration, a size, a flag) with its limits, and the
// field of the section's struct it sets; read_scalars reads every row of a table with one loop.
// A new scalar key of a section is one row here (plus its name in the section's schema key
// list and its line in docs/configuration.md). Internal to src/config/.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "node_reader.h"

namespace rondel::config {

template <class S>
struct ScalarKey {
  enum class Kind : uint8_t { kCount32, kCount64, kDuration, kSize, kFlag };
  std::string_view name;
  Kind kind;
  uint32_t S::*u32 = nullptr;  // kCount32
  uint64_t S::*u64 = nullptr;  // kCount64, kDuration (ms), kSize (bytes)
  bool S::*flag = nullptr;     // kFlag
  uint64_t min = 0;            // counts: both limits; durations (ms) and sizes: the least
  uint64_t max = 0;
};

// The rows' constructors, by how the value is written in the file.
template <class S>
constexpr ScalarKey<S> count(std::string_view name, uint32_t S::*f, uint64_t min, uint64_t max) {
  return {name, ScalarKey<S>::Kind::kCount32, f, nullptr, nullptr, min, max};
}
template <class S>
constexpr ScalarKey<S> count64(std::string_view name, uint64_t S::*f, uint64_t min,
                               uint64_t max) {
  return {name, ScalarKey<S>::Kind::kCount64, nullptr, f, nullptr, min, max};
}
template <class S>
constexpr ScalarKey<S> duration(std::string_view name, uint64_t S::*f, uint64_t min_ms) {
  return {name, ScalarKey<S>::Kind::kDuration, nullptr, f, nullptr, min_ms, 0};
}
template <class S>
constexpr ScalarKey<S> size(std::string_view name, uint64_t S::*f, uint64_t min_bytes) {
  return {name, ScalarKey<S>::Kind::kSize, nullptr, f, nullptr, min_bytes, 0};
}
template <class S>
constexpr ScalarKey<S> flag(std::string_view name, bool S::*f) {
  return {name, ScalarKey<S>::Kind::kFlag, nullptr, nullptr, f, 0, 0};
}

// Reads each row's key of `m` that is present into `out`; each error is reported by `r` at the
// value's FILE:LINE:COL, and the field keeps its default.
template <class S>
void read_scalars(NodeReader& r, const MapFields& m, std::span<const ScalarKey<S>> keys, S& out) {
  using Kind = typename ScalarKey<S>::Kind;
  for (const ScalarKey<S>& k : keys) {
    const Field* g = m.get(k.name);
    if (g == nullptr) continue;
    switch (k.kind) {
      case Kind::kCount32: r.read_unsigned(*g, out.*k.u32, k.min, k.max); break;
      case Kind::kCount64: r.read_u64(*g, out.*k.u64, k.min, k.max); break;
      case Kind::kDuration: r.read_duration(*g, out.*k.u64, k.min); break;
      case Kind::kSize: r.read_size(*g, out.*k.u64, k.min); break;
      case Kind::kFlag: r.read_bool(*g, out.*k.flag); break;
    }
  }
}

}  // namespace rondel::config
